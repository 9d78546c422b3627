// Checkpoint directories (see header).
#include "headprune/io/checkpoint.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/util/mapped_files.h"
#include "headprune/model/geometry.h"
#include "headprune/model/state.h"

namespace hp {
namespace {

void check_dir(const std::string& dir) {
  if (!is_directory(dir)) throw std::runtime_error("checkpoint '" + dir + "': not a directory");
  if (!is_file(join_path(dir, kConfigFile)))
    throw std::runtime_error("checkpoint '" + dir + "': missing " + kConfigFile);
}

// The version a config.json declares (1 when it has none, as the first headprune files).
int64_t checkpoint_version(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("version")) return 1;
  if (!j.at("version").is_number_integer()) throw std::runtime_error(path + ": 'version' must be an integer");
  const int64_t v = j.at("version").get<int64_t>();
  if (v < 1 || v > kCheckpointVersion)
    throw std::runtime_error(path + ": checkpoint version " + std::to_string(v) + " is not supported (this headprune reads 1.." +
                             std::to_string(kCheckpointVersion) + "; a newer headprune wrote it?)");
  return v;
}

ModelConfig config_of(const nlohmann::json& j, const std::string& path) {
  try {
    return ModelConfig::from_json(j);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace

ModelConfig load_config(const std::string& dir) {
  check_dir(dir);
  const std::string path = join_path(dir, kConfigFile);
  return config_of(read_json_file(path), path);
}

Transformer load_checkpoint(const std::string& dir, const LoadOptions& options) {
  if (is_hf_dir(dir)) return import_hf(dir, options).model;  // HuggingFace directory
  check_dir(dir);
  const std::string cpath = join_path(dir, kConfigFile);
  const nlohmann::json j = read_json_file(cpath);
  const int64_t version = checkpoint_version(j, cpath);
  ModelConfig cfg = config_of(j, cpath);
  std::string path = join_path(dir, kWeightsFile);
  const std::string index = join_path(dir, kWeightsIndexFile);
  if (!is_file(path) && is_file(index)) path = index;
  if (!is_file(path)) {
    std::string hint;
    if (is_file(join_path(dir, "pytorch_model.bin")))
      hint = " (found pytorch_model.bin: convert it to safetensors first, e.g. in Python: "
             "safetensors.torch.save_file(torch.load(p, weights_only=True), 'model.safetensors'); never unpickle "
             "a downloaded file without weights_only=True)";
    throw std::runtime_error("checkpoint '" + dir + "': missing " + kWeightsFile + hint);
  }
  SafetensorsFile file;
  if (path == index) {
    file.tensors = read_sharded_safetensors(index);
  } else {
    file = read_safetensors(path);
  }
  if (version == 1) {  // version 1 named the mask buffers head_gate
    TensorMap renamed;
    const std::string old_name = ".head_gate", new_name = ".head_mask";
    for (auto& [name, t] : file.tensors) {
      const bool legacy = name.size() > old_name.size() &&
                          name.compare(name.size() - old_name.size(), old_name.size(), old_name) == 0;
      renamed[legacy ? name.substr(0, name.size() - old_name.size()) + new_name : name] = t;
    }
    file.tensors = std::move(renamed);
  }
  check_tensors_fit(cfg, file.tensors, path);  // a config.json sized beyond its weights allocates nothing
  Transformer model{nullptr};
  {
    DeferredInit deferred;  // every parameter comes from the file: build without allocating
    model = Transformer(cfg);
  }
  load_state_strict(*model, file.tensors, path, options.state());
  check_mapped_files();  // a file truncated while it was read is an error here, not a SIGBUS
  model->eval();
  return model;
}

std::string read_checkpoint_file(const std::string& dir, const std::string& name) {
  const std::string path = join_path(dir, name);
  return is_file(path) ? read_file(path) : std::string();
}

void save_checkpoint(const std::string& dir, TransformerImpl& model, const std::map<std::string, std::string>& extra_files,
                     std::optional<torch::ScalarType> dtype) {
  make_directories(dir);
  for (const auto& kv : extra_files) write_file_atomic(join_path(dir, kv.first), kv.second);
  nlohmann::json j = {{"format", "headprune"}, {"version", kCheckpointVersion}};
  j.update(model.config().to_json());
  std::map<std::string, LazyTensor> tensors;
  for (const auto& entry : state_dict(model)) {
    const std::string& name = entry.first;
    const torch::Tensor& t = entry.second;  // a named variable: C++17 lambdas cannot capture bindings
    if (dtype && at::isFloatingType(t.scalar_type()) && t.scalar_type() != *dtype)
      tensors.emplace(name, LazyTensor{*dtype, t.sizes().vec(), [t, d = *dtype] { return t.to(d).contiguous(); }});
    else
      tensors.emplace(name, LazyTensor::of(t));
  }
  // One file up to 5 GiB (every model before the 7B-class ones), else HF's shards and index; a
  // directory written before holds nothing stale (the caller writes into a fresh one).
  write_safetensors_sharded(dir, "model", tensors, {{"format", "headprune"}});
  write_json_file(join_path(dir, kConfigFile), j);
}

std::string describe(const ModelConfig& c) {
  auto label = [](std::string s) {
    s.resize(std::max<size_t>(s.size() + 1, 20), ' ');
    return s;
  };
  std::ostringstream o;
  o << label("arch") << to_string(c.arch) << "\n"
    << label("d_model") << c.d_model << " (head_dim " << c.head_dim << ", d_ff " << c.d_ff << ")\n";
  if (c.effective_kv_heads() != c.n_heads)
    o << label("attention") << "grouped-query: " << c.effective_kv_heads() << " key/value heads for " << c.n_heads
      << " query heads per layer\n";
  if (!c.qkv_bias || !c.o_bias)
    o << label("biases") << "q/k/v " << (c.qkv_bias ? "yes" : "no") << ", output " << (c.o_bias ? "yes" : "no") << "\n";
  o << label("vocab") << c.vocab_size;
  if (c.arch == Arch::EncoderDecoder) o << " -> " << c.effective_tgt_vocab();
  o << "\n";
  if (c.n_encoder_layers) o << label("encoder layers") << c.n_encoder_layers << "\n";
  if (c.n_decoder_layers) o << label("decoder layers") << c.n_decoder_layers << "\n";
  o << label("norm") << to_string(c.norm) << "-" << (c.norm_kind == NormKind::RmsNorm ? "RMSNorm" : "LN") << ", "
    << to_string(c.activation) << (c.gated_ffn ? " gated (SwiGLU-style)" : "") << ", " << to_string(c.positional)
    << (c.split_sinusoid ? " (sin | cos halves)" : "") << " positions (max " << c.max_positions << ")"
    << (c.tie_embeddings ? ", tied embeddings" : "") << (c.share_embeddings ? ", one table for both stacks" : "")
    << (c.logits_bias ? ", logits bias" : "") << "\n";
  if (c.positional == Positional::Rotary) {
    o << label("rotary") << "theta " << c.rope_theta;
    if (c.rope_scaling.type != RopeScalingType::Default)
      o << ", scaling " << to_string(c.rope_scaling.type) << " x" << c.rope_scaling.factor;
    if (c.rotary_dim > 0 && c.rotary_dim < c.head_dim) o << ", first " << c.rotary_dim << " of " << c.head_dim << " channels";
    o << "\n";
  }
  if (c.positional == Positional::Relative)
    o << label("relative") << c.relative_buckets << " buckets up to distance " << c.relative_max_distance
      << " (T5 bias per head)\n";
  if (!c.scaled_attention || c.output_scale != 1.0)
    o << label("scaling") << "scores " << (c.scaled_attention ? "/ sqrt(head_dim)" : "unscaled") << ", output x "
      << c.output_scale << "\n";
  if (c.sliding_window > 0) o << label("sliding window") << c.sliding_window << " positions\n";
  if (c.arch == Arch::EncoderClassifier)
    o << label("classes") << c.n_classes << " (segments " << c.n_segments << ")\n";
  for (AttnType t : c.attn_types()) {
    const auto& hs = c.heads(t);
    bool uniform = true;
    for (const auto& l : hs) uniform = uniform && l.size() == hs.front().size();
    o << label(to_string(t) + " heads") << c.n_heads_kept(t) << "/" << c.n_heads_total(t) << " kept: ";
    if (uniform) {
      o << hs.front().size() << " x " << hs.size() << " layers";
    } else {
      o << "[";
      for (size_t l = 0; l < hs.size(); ++l) o << (l ? ", " : "") << hs[l].size();
      o << "] per layer";
    }
    o << "\n";
    for (size_t l = 0; l < hs.size(); ++l) {
      if (static_cast<int64_t>(hs[l].size()) == c.n_heads) continue;  // list only pruned layers
      o << "  layer " << l << " keeps [";
      for (size_t i = 0; i < hs[l].size(); ++i) o << (i ? ", " : "") << hs[l][i];
      o << "]" << (hs[l].empty() ? " (attention skipped)" : "");
      if (c.effective_kv_heads() != c.n_heads && !hs[l].empty()) {
        const HeadGeometry g = head_geometry(c, t, static_cast<int64_t>(l));
        o << ", key/value heads [";
        const auto kv = g.kv_heads();
        for (size_t i = 0; i < kv.size(); ++i) o << (i ? ", " : "") << kv[i];
        o << "]";
      }
      o << "\n";
    }
  }
  return o.str();
}

}  // namespace hp
