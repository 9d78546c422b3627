// Export and info (see header).
#include "headprune/jobs/export_job.h"

#include <sstream>
#include <stdexcept>

#include "headprune/data/model_dir.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/io/hf.h"

namespace hp {

std::string run_export(const ExportRequest& req) {
  if (req.hf_dir.empty() && req.native_dir.empty()) throw std::invalid_argument("export: give --hf DIR and/or --native DIR");
  check_outputs_apart({{req.hf_dir, "--hf"}, {req.native_dir, "--native"}}, {{req.checkpoint, "the model"}});  // before loading
  Transformer model{nullptr};
  nlohmann::json base = nlohmann::json::object();
  if (is_hf_dir(req.checkpoint)) {
    auto hf = import_hf(req.checkpoint);
    model = hf.model;
    base = hf.config;
  } else {
    model = load_checkpoint(req.checkpoint);
  }
  const auto files = tokenizer_files(req.checkpoint);
  std::optional<OutputDir> hf_out, native_out;  // both checked before either is written
  const std::vector<NamedPath> inputs = {{req.checkpoint, "the model"}};
  if (!req.hf_dir.empty()) hf_out.emplace(req.hf_dir, OutputDir::Options{"export-hf", req.overwrite, false, inputs, "--hf"});
  if (!req.native_dir.empty())
    native_out.emplace(req.native_dir, OutputDir::Options{"checkpoint", req.overwrite, false, inputs, "--native"});
  std::string out;
  if (hf_out) {
    export_hf(hf_out->path(), *model, base, req.hf_layout);
    // An HF tokenizer goes along (HF's own tokenizer.json too: T5's, Llama's); headprune's BPE has no HF form.
    const bool own_bpe = is_headprune_tokenizer(join_path(req.checkpoint, kTokenizerFile));
    for (const auto& [name, bytes] : files)
      if (name != kTokenizerFile || !own_bpe) write_file_atomic(join_path(hf_out->path(), name), bytes);
    const auto cfg = read_json_file(join_path(hf_out->path(), kConfigFile));
    hf_out->commit();
    const auto pruned = cfg.find("pruned_heads");
    const bool sliced = pruned != cfg.end() && !pruned->empty();
    out += "wrote " + req.hf_dir + " (" + cfg.at("model_type").get<std::string>() +
           (sliced ? ", pruned_heads " + pruned->dump() : ", dense") + ")\n";
  }
  if (native_out) {
    save_checkpoint(native_out->path(), *model, files);
    native_out->commit();
    out += "wrote " + req.native_dir + " (headprune checkpoint)\n";
  }
  return out;
}

namespace {
// `info` maps the weights and reads none of them (only the head masks): headers and config, fast at
// any size. The weights' values are checked by the jobs that use them.
Transformer peek(const std::string& checkpoint) {
  LoadOptions o;
  o.check_finite = false;
  return load_checkpoint(checkpoint, o);
}
}  // namespace

nlohmann::json info_json(const std::string& checkpoint) {
  Transformer model = peek(checkpoint);  // validates config and shapes strictly
  const ModelConfig& cfg = model->config();
  nlohmann::json j = cfg.to_json();
  j["n_parameters"] = model->n_parameters();
  nlohmann::json kept = nlohmann::json::object();
  for (AttnType t : cfg.attn_types()) {
    nlohmann::json counts = nlohmann::json::array();
    for (const auto& l : cfg.heads(t)) counts.push_back(l.size());
    kept[to_string(t)] = counts;
  }
  j["heads_per_layer"] = kept;
  nlohmann::json m = nlohmann::json::array();
  for (const auto& h : model->masked_heads()) m.push_back(to_string(h));
  j["masked_heads"] = m;
  return j;
}

std::string info_text(const std::string& checkpoint) {
  Transformer model = peek(checkpoint);
  const auto masked = model->masked_heads();
  std::ostringstream out;
  out << "checkpoint          " << checkpoint << "\n" << describe(model->config());
  out << "parameters          " << model->n_parameters() << "\n";
  out << "masked heads        " << masked.size();
  for (size_t i = 0; i < masked.size(); ++i) out << (i ? ", " : " (") << to_string(masked[i]);
  out << (masked.empty() ? "" : ")") << "\n";
  return out.str();
}

}  // namespace hp
