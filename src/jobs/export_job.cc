// Export and info (see header).
#include "headprune/jobs/export_job.h"

#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "headprune/data/gguf_vocab.h"
#include "headprune/data/model_dir.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/io/gguf_model.h"
#include "headprune/io/hf.h"
#include "headprune/io/onnx_model.h"
#include "headprune/version.h"

namespace hp {

const OptionTable<ExportRequest>& export_request_table() {
  using E = ExportRequest;
  static const OptionTable<E> t =
      OptionTable<E>()
          .text("hf_dir", "--hf", "HF output directory (config.json, model.safetensors)", &E::hf_dir, false)
          .parsed("hf_layout", "--hf-layout",
                  "auto, native (LLaMA family and T5, the same heads kept in every layer: the smaller model's own "
                  "num_attention_heads, num_key_value_heads and head_dim, or T5's num_heads, weights sliced), dense (every head count as "
                  "configured, removed heads zero: every transformers version) or pruned_heads (HF v4's "
                  "pruned_heads: transformers v4 only); auto is native where it applies, else dense. Families: " +
                      hf_families_summary(),
                  [](E& e, const std::string& s) { e.hf_layout = parse_hf_layout(s); }, "auto")
          .text("native_dir", "--native", "headprune checkpoint output directory", &E::native_dir, false)
          .text("gguf_path", "--gguf",
                "GGUF file for llama.cpp (LLaMA family; uneven head counts per layer as arch deci; the tokenizer inside)",
                &E::gguf_path, false)
          .parsed("gguf_dtype", "--dtype", "GGUF weights: f32, f16, bf16, or ggml's blocks q8_0 or q4_0 (norms and biases stay f32; a weight whose rows do not split into 32-value blocks stays f16)",
                  [](E& e, const std::string& s) {
                    parse_gguf_dtype(s);
                    e.gguf_dtype = s;
                  },
                  "f32")
          .parsed("gguf_output_dtype", "--gguf-output-dtype",
                  "GGUF output projection's type (the token embedding's when tied; llama-quantize's "
                  "--output-tensor-type): auto (a step above --dtype for ggml's blocks: f16 under q8_0, q8_0 under "
                  "q4_0; else --dtype), f32, f16, bf16, q8_0 or q4_0",
                  [](E& e, const std::string& s) {
                    if (s != "auto") parse_gguf_dtype(s);
                    e.gguf_output_dtype = s;
                  },
                  "auto")
          .text("onnx_path", "--onnx", "ONNX file (encoder classifiers and decoder LMs, per-layer heads, dynamic batch "
                "and length)", &E::onnx_path, false)
          .parsed("onnx_attention", "--onnx-attention",
                  "auto (ONNX Runtime's fused com.microsoft Attention where an encoder layer allows it, else standard "
                  "ops), fused (refused where a layer does not allow it; with --onnx-dir a decoder's "
                  "GroupQueryAttention, for unpadded or right-padded rows) or standard (default-domain ops only: any "
                  "ONNX runtime)",
                  [](E& e, const std::string& s) {
                    parse_onnx_attention(s);
                    e.onnx_attention = s;
                  },
                  "auto")
          .text("onnx_dir", "--onnx-dir",
                "ONNX folder for transformers.js, optimum and ONNX Runtime: config.json, generation_config.json, the "
                "tokenizer files and onnx/model.onnx; a decoder LM with a key/value cache (optimum's "
                "past_key_values.N.key/value -> present.N.key/value, each layer's own head count), an encoder "
                "classifier as --onnx writes it",
                &E::onnx_dir, false)
          .yes_no("onnx_external_data", "--onnx-external-data",
                  "write the ONNX weights to FILE_data beside the .onnx file (ONNX's external data; always done for "
                  "a model past protobuf's 2 GiB)",
                  &E::onnx_external_data, FlagStyle::Sets);
  return t;
}

namespace {

std::string counts(const std::vector<int64_t>& v) { return nlohmann::json(v).dump(); }

// An HF tokenizer goes along (HF's own tokenizer.json too: T5's, Llama's); headprune's BPE has no HF form.
void write_tokenizer_files(const std::string& dir, const std::string& checkpoint,
                           const std::map<std::string, std::string>& files) {
  const bool own_bpe = is_headprune_tokenizer(join_path(checkpoint, kTokenizerFile));
  for (const auto& [name, bytes] : files)
    if ((name != kTokenizerFile || !own_bpe) && name != kHfBaseConfigFile) write_file_atomic(join_path(dir, name), bytes);
}

// Built before anything is written (a model or tokenizer GGUF cannot express fails first); the
// tensors are made as the file is written.
struct GgufOutput {
  GgufFile file;
  GgufLayout layout;
  std::string dtype;
};

GgufTypes gguf_types(const ExportRequest& req) {
  const GgmlType weights = parse_gguf_dtype(req.gguf_dtype);
  return {weights, req.gguf_output_dtype == "auto" ? default_gguf_output_type(weights) : parse_gguf_dtype(req.gguf_output_dtype)};
}

GgufOutput prepare_gguf(TransformerImpl& model, const std::map<std::string, std::string>& files,
                        const std::string& checkpoint, const ExportRequest& req) {
  check_gguf_family(model.config());  // before the tokenizer is looked at
  GgufOutput g;
  g.file = to_gguf(model, gguf_vocab(files, checkpoint), gguf_types(req), display_path(checkpoint), &g.layout);
  g.dtype = req.gguf_dtype;
  return g;
}

std::string write_gguf_output(const OutputFile& out, const GgufOutput& g, const std::string& checkpoint) {
  check_output_file(out, {{checkpoint, "the model"}});
  write_file_atomic(out.path, [&](std::ostream& o) { write_gguf(o, g.file); });
  std::string line = "wrote " + out.path + " (gguf " + g.layout.arch + ", " + g.dtype + ": query heads per layer " +
                     counts(g.layout.n_head) + ", key/value heads " + counts(g.layout.n_head_kv);
  if (to_string(g.layout.output_type) != g.dtype) line += "; output projection " + to_string(g.layout.output_type);
  if (!g.layout.kept_f16.empty())
    line += "; " + std::to_string(g.layout.kept_f16.size()) + " weights kept f16, their rows not whole " + g.dtype +
            " blocks of 32 (" + g.layout.kept_f16.front() + (g.layout.kept_f16.size() > 1 ? ", ..." : "") + ")";
  if (!g.layout.stand_in_layers.empty())
    line += "; emptied layers " + counts(g.layout.stand_in_layers) + " keep a zero stand-in head (layer 0: llama.cpp reads "
            "the head size there; others: their output bias)";
  return line + ")\n";
}

// Past this many weight bytes the model file would near protobuf's 2 GiB: the weights go outside.
constexpr uint64_t kOnnxInlineLimit = 1900ull << 20;

// Whether the weights go to an external data file: asked for, or too large to be inside.
bool weights_outside(const OnnxExport& e, bool asked) { return asked || e.graph.initializer_bytes() > kOnnxInlineLimit; }

// The .onnx file at `path` (its weights in PATH_data beside it when `external` or when they are too
// large to be inside); returns what the output line says about where the weights are.
std::string write_onnx_file(const std::string& path, const OnnxExport& e, const ModelConfig& cfg, bool external) {
  const std::map<std::string, std::string> meta = {{"headprune.exporter", std::string("headprune ") + HP_VERSION_STRING},
                                                   {"headprune.arch", to_string(cfg.arch)}};
  if (!weights_outside(e, external)) {
    write_file_atomic(path, [&](std::ostream& o) { e.graph.write(o, "headprune", meta); });
    return "";
  }
  const std::string data = path + "_data";  // ONNX's convention: model.onnx -> model.onnx_data
  OnnxExternalData ext;
  ext.location = std::filesystem::path(data).filename().string();
  write_file_atomic(data, [&](std::ostream& d) {
    ext.out = &d;
    write_file_atomic(path, [&](std::ostream& o) { e.graph.write(o, "headprune", meta, &ext); });
  });
  return ", weights in " + ext.location;
}

std::string onnx_summary(const OnnxExport& e, const ModelConfig& cfg) {
  std::string s = to_string(cfg.arch) + ": " + std::to_string(e.fused_layers) + " layers as ONNX Runtime's fused " +
                  (e.kv_cache ? "GroupQueryAttention, " : "Attention, ") +
                  std::to_string(e.standard_layers) + " in standard ops, " + std::to_string(e.empty_layers) + " without heads";
  if (e.kv_cache) s += "; key/value cache in " + std::to_string(e.cached_layers) + " layers";
  return s;
}

std::string write_onnx_output(const OutputFile& out, const OnnxExport& e, const ModelConfig& cfg,
                              const std::string& checkpoint, bool external) {
  check_output_file(out, {{checkpoint, "the model"}});
  if (weights_outside(e, external))
    check_output_file(OutputFile{out.path + "_data", "--onnx", "ONNX external data",
                                 [model = out.path](const std::string&) { return file_head_contains("headprune")(model); },
                                 out.overwrite},
                      {{checkpoint, "the model"}});  // an earlier export's data file goes with its model file
  const std::string where = write_onnx_file(out.path, e, cfg, external);
  return "wrote " + out.path + " (onnx, " + onnx_summary(e, cfg) + where + ")\n";
}

// generation_config.json as HF writes it: the token ids generation starts and stops with.
nlohmann::json generation_config(const nlohmann::json& config) {
  nlohmann::json g = {{"_from_model_config", true}};
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"})
    if (config.contains(k) && !config.at(k).is_null()) g[k] = config.at(k);
  return g;
}

// The transformers.js / optimum folder: config.json (the HF export's, auto layout: the smaller model's
// own head counts where it is uniform; the file's inputs say each layer's), generation_config.json,
// the tokenizer files, onnx/model.onnx.
std::string write_onnx_folder(OutputDir& dir, const OnnxExport& e, TransformerImpl& model, const nlohmann::json& base,
                              const std::map<std::string, std::string>& files, const ExportRequest& req) {
  auto config = to_hf(model, base).config;  // the tensors are lazy: none is made
  if (weights_outside(e, req.onnx_external_data))
    config["transformers.js_config"]["use_external_data_format"] = {{"model.onnx", 1}};  // one model.onnx_data
  write_json_file(join_path(dir.path(), kConfigFile), config);
  write_json_file(join_path(dir.path(), "generation_config.json"), generation_config(config));
  write_tokenizer_files(dir.path(), req.checkpoint, files);
  make_directories(join_path(dir.path(), "onnx"));
  const std::string where = write_onnx_file(join_path(dir.path(), "onnx/model.onnx"), e, model.config(), req.onnx_external_data);
  dir.commit();
  return "wrote " + req.onnx_dir + " (onnx folder, " + config.at("model_type").get<std::string>() + ", " +
         onnx_summary(e, model.config()) + where + ")\n";
}

}  // namespace

namespace {
// The request's options alone, before any file is looked at.
void check_export_options(const ExportRequest& req, const Runtime& rt) {
  if (req.hf_dir.empty() && req.native_dir.empty() && req.gguf_path.empty() && req.onnx_path.empty() && req.onnx_dir.empty())
    throw std::invalid_argument("export: give --hf DIR, --native DIR, --gguf FILE, --onnx FILE and/or --onnx-dir DIR");
  if (req.onnx_external_data && req.onnx_path.empty() && req.onnx_dir.empty())
    throw std::invalid_argument("export: --onnx-external-data is for --onnx FILE or --onnx-dir DIR");
  // The command line's `--dtype` after `export` is this row (the GGUF file's); the global one, before
  // the subcommand, is rt.dtype. A GGUF dtype without a GGUF file was meant as the other.
  if (req.gguf_path.empty() && req.gguf_dtype != "f32")
    throw std::invalid_argument("export: --dtype " + req.gguf_dtype + " after 'export' is the GGUF weights' type and needs "
                                "--gguf FILE; the dtype the model is loaded and written in is the global --dtype, "
                                "before the subcommand (headprune --dtype " + req.gguf_dtype + " export ...)");
  if (!rt.device.is_cpu())
    throw std::invalid_argument("export: --device " + rt.device.str() + " does not apply (an export computes nothing; "
                                "leave --device cpu)");
}
}  // namespace

std::string run_export(const ExportRequest& req, const Runtime& rt) {
  check_export_options(req, rt);
  check_outputs_apart({{req.hf_dir, "--hf"}, {req.native_dir, "--native"}, {req.gguf_path, "--gguf"}, {req.onnx_path, "--onnx"},
                       {req.onnx_dir, "--onnx-dir"}},
                      {{req.checkpoint, "the model"}});  // before loading
  std::optional<OutputFile> gguf_out;
  gguf_types(req);  // bad options fail before the model is read
  if (req.gguf_path.empty() && req.gguf_output_dtype != "auto")
    throw std::invalid_argument("export: --gguf-output-dtype needs --gguf FILE");
  const auto onnx_attention = parse_onnx_attention(req.onnx_attention);
  std::optional<OutputFile> onnx_out;
  if (!req.onnx_path.empty()) {
    onnx_out = OutputFile{req.onnx_path, "--onnx", "an ONNX file", file_head_contains("headprune"), req.overwrite};
    check_output_file(*onnx_out, {{req.checkpoint, "the model"}});
  }
  if (!req.gguf_path.empty()) {
    gguf_out = OutputFile{req.gguf_path, "--gguf", "a GGUF file", file_head_contains("headprune.exporter"), req.overwrite};
    check_output_file(*gguf_out, {{req.checkpoint, "the model"}});
  }
  Transformer model{nullptr};
  nlohmann::json base = nlohmann::json::object();
  LoadOptions lo;  // in --dtype, and written so: an export computes nothing (no fp32 widening on the CPU)
  lo.dtype = rt.dtype;
  if (is_hf_dir(req.checkpoint)) {
    auto hf = import_hf(req.checkpoint, lo);
    model = hf.model;
    base = hf.config;
  } else {
    model = load_checkpoint(req.checkpoint, lo);
  }
  const auto files = tokenizer_files(req.checkpoint);
  if (const auto it = files.find(kHfBaseConfigFile); it != files.end() && !is_hf_dir(req.checkpoint))
    base = parse_json(it->second, join_path(req.checkpoint, kHfBaseConfigFile));  // the HF config it was made from
  std::optional<GgufOutput> gguf;
  if (gguf_out) gguf = prepare_gguf(*model, files, req.checkpoint, req);
  std::optional<OnnxExport> onnx, onnx_folder;
  if (onnx_out) onnx = to_onnx(*model, onnx_attention);
  if (!req.onnx_dir.empty()) onnx_folder = to_onnx(*model, onnx_attention, model->config().arch == Arch::DecoderLM);
  std::optional<OutputDir> hf_out, native_out, onnx_dir_out;  // all checked before any is written
  const std::vector<NamedPath> inputs = {{req.checkpoint, "the model"}};
  if (!req.hf_dir.empty()) hf_out.emplace(req.hf_dir, OutputDir::Options{"export-hf", req.overwrite, false, inputs, "--hf"});
  if (onnx_folder)
    onnx_dir_out.emplace(req.onnx_dir, OutputDir::Options{"export-onnx", req.overwrite, false, inputs, "--onnx-dir"});
  if (!req.native_dir.empty())
    native_out.emplace(req.native_dir, OutputDir::Options{"checkpoint", req.overwrite, false, inputs, "--native"});
  std::string out;
  if (hf_out) {
    const HfLayout layout = export_hf(hf_out->path(), *model, base, req.hf_layout);
    write_tokenizer_files(hf_out->path(), req.checkpoint, files);
    const auto cfg = read_json_file(join_path(hf_out->path(), kConfigFile));
    hf_out->commit();
    std::string how = ", dense";
    if (layout == HfLayout::PrunedHeads) how = ", pruned_heads " + cfg.value("pruned_heads", nlohmann::json::object()).dump();
    if (layout == HfLayout::Native && cfg.contains("d_kv"))  // T5: one count for every stack
      how = ", native: " + cfg.at("num_heads").dump() + " heads of " + cfg.at("d_kv").dump() +
            " channels in every layer of every stack";
    else if (layout == HfLayout::Native)
      how = ", native: " + cfg.at("num_attention_heads").dump() + " query heads, " + cfg.at("num_key_value_heads").dump() +
            " key/value heads of " + cfg.at("head_dim").dump() + " channels in every layer";
    out += "wrote " + req.hf_dir + " (" + cfg.at("model_type").get<std::string>() + how + ")\n";
  }
  if (gguf) out += write_gguf_output(*gguf_out, *gguf, req.checkpoint);
  if (onnx) out += write_onnx_output(*onnx_out, *onnx, model->config(), req.checkpoint, req.onnx_external_data);
  if (onnx_folder) out += write_onnx_folder(*onnx_dir_out, *onnx_folder, *model, base, files, req);
  if (native_out) {
    save_checkpoint(native_out->path(), *model, files);
    native_out->commit();
    out += "wrote " + req.native_dir + " (headprune checkpoint)\n";
  }
  return out;
}

namespace {
// `info` maps the weights and reads none of them (only the head masks): headers and config, fast at
// any size. The weights' values are checked by the jobs that use them; a tokenizer, when there is one,
// against the model's vocabulary (check_tokenizer_fits).
Transformer peek(const std::string& checkpoint) {
  LoadOptions o;
  o.check_finite = false;
  Transformer model = load_checkpoint(checkpoint, o);
  if (const auto tok = load_tokenizer(checkpoint)) check_tokenizer_fits(*tok, model->config().vocab_size, checkpoint);
  return model;
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
