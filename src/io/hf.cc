// HuggingFace BERT / GPT-2 import and export (see header).
#include "headprune/io/hf.h"

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"

namespace hp {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error(source + ": " + what);
}

int64_t checked_int(const nlohmann::json& v, const char* key, const std::string& source) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail(source, std::string("config field '") + key + "' is " + v.dump() + ", too large for a 64-bit integer");
  return v.get<int64_t>();
}

int64_t req_int(const nlohmann::json& c, const char* key, const std::string& source) {
  if (!c.contains(key) || !c.at(key).is_number_integer())
    fail(source, std::string("config field '") + key + "' is missing or not an integer");
  return checked_int(c.at(key), key, source);
}

int64_t opt_int(const nlohmann::json& c, const char* key, int64_t dflt, const std::string& source) {
  if (!c.contains(key) || c.at(key).is_null()) return dflt;
  if (!c.at(key).is_number_integer()) fail(source, std::string("config field '") + key + "' must be an integer");
  return checked_int(c.at(key), key, source);
}

std::string opt_str(const nlohmann::json& c, const char* key, const std::string& dflt, const std::string& source) {
  if (!c.contains(key) || c.at(key).is_null()) return dflt;
  if (!c.at(key).is_string()) fail(source, std::string("config field '") + key + "' must be a string, got " + c.at(key).dump());
  return c.at(key).get<std::string>();
}

bool opt_bool(const nlohmann::json& c, const char* key, bool dflt, const std::string& source) {
  if (!c.contains(key) || c.at(key).is_null()) return dflt;
  if (!c.at(key).is_boolean()) fail(source, std::string("config field '") + key + "' must be true or false, got " + c.at(key).dump());
  return c.at(key).get<bool>();
}

double opt_num(const nlohmann::json& c, const char* key, double dflt, const std::string& source) {
  if (!c.contains(key) || c.at(key).is_null()) return dflt;
  if (!c.at(key).is_number()) fail(source, std::string("config field '") + key + "' must be a number");
  return c.at(key).get<double>();
}

Activation parse_hf_activation(const std::string& s, const std::string& source) {
  if (s == "gelu") return Activation::Gelu;
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") return Activation::GeluTanh;
  if (s == "relu") return Activation::Relu;
  fail(source, "activation '" + s + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)");
}

std::string hf_activation(Activation a) {
  switch (a) {
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_new";
    case Activation::Relu: return "relu";
  }
  return "gelu";
}

// pruned_heads {"layer": [ids]} -> kept heads per layer.
std::vector<std::vector<int64_t>> kept_from_pruned(const nlohmann::json& c, int64_t layers, int64_t heads,
                                                   const std::string& source) {
  std::vector<std::vector<int64_t>> kept(static_cast<size_t>(layers));
  std::vector<std::set<int64_t>> pruned(static_cast<size_t>(layers));
  if (c.contains("pruned_heads") && !c.at("pruned_heads").is_null()) {
    const auto& p = c.at("pruned_heads");
    if (!p.is_object()) fail(source, "pruned_heads must be an object {\"layer\": [head ids]}");
    for (auto it = p.begin(); it != p.end(); ++it) {
      int64_t l = -1;
      try {
        size_t used = 0;
        l = std::stoll(it.key(), &used);
        if (used != it.key().size()) l = -1;
      } catch (const std::exception&) {
      }
      if (l < 0 || l >= layers)
        fail(source, "pruned_heads: layer '" + it.key() + "' is not in [0, " + std::to_string(layers) + ")");
      if (!it.value().is_array()) fail(source, "pruned_heads['" + it.key() + "'] must be a list of head ids");
      for (const auto& h : it.value()) {
        if (!h.is_number_integer() || h.get<int64_t>() < 0 || h.get<int64_t>() >= heads)
          fail(source, "pruned_heads['" + it.key() + "']: head " + h.dump() + " is not in [0, " +
                           std::to_string(heads) + ")");
        pruned[static_cast<size_t>(l)].insert(h.get<int64_t>());
      }
    }
  }
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < heads; ++h)
      if (!pruned[static_cast<size_t>(l)].count(h)) kept[static_cast<size_t>(l)].push_back(h);
  return kept;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tensors by HF name with a known prefix stripped; takes them out one by one.
class HfTensors {
 public:
  HfTensors(const TensorMap& t, const std::string& prefix, const std::string& source) : source_(source) {
    for (const auto& [k, v] : t) {
      std::string name = k.rfind(prefix, 0) == 0 ? k.substr(prefix.size()) : k;
      // Old BERT files name LayerNorm parameters gamma / beta.
      for (const auto& [from, to] : {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"},
                                     {"LayerNorm.beta", "LayerNorm.bias"}})
        if (ends_with(name, from)) name = name.substr(0, name.size() - from.size()) + to;
      left_[name] = v;
      original_[name] = k;
    }
  }
  bool has(const std::string& name) const { return left_.count(name) > 0; }
  // The leading size of a matrix (e.g. the classes of a classifier), checked to be one.
  int64_t rows(const std::string& name) const {
    const auto it = left_.find(name);
    if (it == left_.end()) fail(source_, "missing tensor '" + name + "'");
    if (it->second.dim() != 2)
      fail(source_, "tensor '" + original_.at(name) + "' has shape " + shape_str(it->second.sizes()) + ", expected a matrix");
    return it->second.size(0);
  }
  // The tensor, checked against the expected shape (empty = any).
  torch::Tensor take(const std::string& name, std::vector<int64_t> shape = {}) {
    auto it = left_.find(name);
    if (it == left_.end()) fail(source_, "missing tensor '" + name + "'");
    auto t = it->second;
    if (!shape.empty() && t.sizes().vec() != shape)
      fail(source_, "tensor '" + original_[name] + "' has shape " + shape_str(t.sizes()) + ", expected " +
                        shape_str(shape) + " (from config.json and its pruned_heads)");
    left_.erase(it);
    return t.to(torch::kFloat);
  }
  void drop_if(const std::function<bool(const std::string&)>& ignorable) {
    for (auto it = left_.begin(); it != left_.end();) it = ignorable(it->first) ? left_.erase(it) : std::next(it);
  }
  void expect_empty() const {
    if (!left_.empty())
      fail(source_, "unexpected tensor '" + original_.at(left_.begin()->first) + "' (" +
                        std::to_string(left_.size()) + " left over)");
  }

 private:
  std::string source_;
  TensorMap left_;
  std::map<std::string, std::string> original_;
};

// The name tables: HF module (without the bert. / transformer. prefix) -> headprune module. Every
// entry stands for its .weight and .bias; import and export both read them.
struct Rename {
  const char* hf;
  const char* ours;
};
constexpr Rename kBertEmbeddings[] = {{"embeddings.word_embeddings", "encoder.embed_tokens"},
                                      {"embeddings.position_embeddings", "encoder.embed_positions"},
                                      {"embeddings.token_type_embeddings", "encoder.embed_segments"}};
constexpr Rename kBertEmbeddingNorm = {"embeddings.LayerNorm", "encoder.embed_norm"};
constexpr Rename kBertLayer[] = {  // per layer: encoder.layer.L.<hf> -> encoder.layers.L.<ours>
    {"attention.self.query", "self_attn.q_proj"},        {"attention.self.key", "self_attn.k_proj"},
    {"attention.self.value", "self_attn.v_proj"},        {"attention.output.dense", "self_attn.o_proj"},
    {"attention.output.LayerNorm", "self_attn_norm"},    {"intermediate.dense", "ffn.fc1"},
    {"output.dense", "ffn.fc2"},                         {"output.LayerNorm", "ffn_norm"}};
constexpr Rename kBertHeads[] = {{"pooler.dense", "pooler"}, {"classifier", "classifier"}};  // classifier: no prefix
constexpr Rename kGpt2LayerNorms[] = {{"ln_1", "self_attn_norm"}, {"ln_2", "ffn_norm"}};  // per layer h.L.
constexpr Rename kGpt2LayerConv1D[] = {  // per layer; Conv1D weights are [in, out]: transposed
    {"attn.c_proj", "self_attn.o_proj"}, {"mlp.c_fc", "ffn.fc1"}, {"mlp.c_proj", "ffn.fc2"}};
constexpr const char* kGpt2Qkv[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};  // attn.c_attn

std::string bert_layer(int64_t l, bool hf) {
  return (hf ? "encoder.layer." : "encoder.layers.") + std::to_string(l) + ".";
}
std::string gpt2_layer(int64_t l, bool hf) { return (hf ? "h." : "decoder.layers.") + std::to_string(l) + "."; }

HfModel import_bert(const nlohmann::json& c, const TensorMap& tensors, const std::string& source,
                    const std::string& csrc) {
  ModelConfig cfg;
  cfg.arch = Arch::EncoderClassifier;
  cfg.vocab_size = req_int(c, "vocab_size", csrc);
  cfg.d_model = req_int(c, "hidden_size", csrc);
  cfg.n_heads = req_int(c, "num_attention_heads", csrc);
  cfg.n_encoder_layers = req_int(c, "num_hidden_layers", csrc);
  cfg.d_ff = req_int(c, "intermediate_size", csrc);
  cfg.max_positions = req_int(c, "max_position_embeddings", csrc);
  cfg.n_segments = opt_int(c, "type_vocab_size", 2, csrc);
  cfg.layer_norm_eps = opt_num(c, "layer_norm_eps", 1e-12, csrc);
  cfg.dropout = opt_num(c, "hidden_dropout_prob", 0.1, csrc);
  cfg.attention_dropout = opt_num(c, "attention_probs_dropout_prob", 0.1, csrc);
  cfg.pad_id = opt_int(c, "pad_token_id", 0, csrc);
  cfg.activation = parse_hf_activation(opt_str(c, "hidden_act", "gelu", csrc), csrc);
  if (const auto pe = opt_str(c, "position_embedding_type", "absolute", csrc); pe != "absolute")
    fail(csrc, "position_embedding_type '" + pe + "' is not supported (absolute only)");
  if (cfg.n_heads <= 0 || cfg.d_model % cfg.n_heads != 0)
    fail(csrc, "hidden_size must be a multiple of num_attention_heads");
  cfg.positional = Positional::Learned;
  cfg.norm = NormPosition::Post;
  cfg.embed_layer_norm = true;
  cfg.tie_embeddings = false;
  cfg.encoder_self_heads = kept_from_pruned(c, cfg.n_encoder_layers, cfg.n_heads, csrc);

  const bool prefixed = std::any_of(tensors.begin(), tensors.end(), [](const auto& kv) { return kv.first.rfind("bert.", 0) == 0; });
  HfTensors t(tensors, prefixed ? "bert." : "", source);
  const bool has_classifier = t.has("classifier.weight");
  if (has_classifier) {
    cfg.n_classes = t.rows("classifier.weight");
  } else if (c.contains("id2label") && c.at("id2label").is_object() && !c.at("id2label").empty() &&
             c.at("id2label").size() <= static_cast<size_t>(ConfigLimits::classes)) {
    cfg.n_classes = static_cast<int64_t>(c.at("id2label").size());
  } else {
    cfg.n_classes = opt_int(c, "num_labels", 2, csrc);
  }
  try {
    cfg.finalize();
  } catch (const std::invalid_argument& e) {
    fail(csrc, e.what());
  }
  check_tensors_fit(cfg, tensors, source);  // before anything is allocated
  HfModel out;
  out.model_type = "bert";
  out.config = c;
  out.model = Transformer(cfg);
  TensorMap s = state_dict(*out.model);
  auto put = [&](const std::string& ours, const std::string& hf) { s[ours] = t.take(hf, s.at(ours).sizes().vec()); };
  auto linear = [&](const std::string& ours, const std::string& hf) {
    put(ours + ".weight", hf + ".weight");
    put(ours + ".bias", hf + ".bias");
  };
  for (const auto& r : kBertEmbeddings) put(std::string(r.ours) + ".weight", std::string(r.hf) + ".weight");
  linear(kBertEmbeddingNorm.ours, kBertEmbeddingNorm.hf);
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l)
    for (const auto& r : kBertLayer) linear(bert_layer(l, false) + r.ours, bert_layer(l, true) + r.hf);
  // BertModel checkpoints have no classifier (and may have no pooler): those start fresh.
  for (const auto& r : kBertHeads) {
    if (t.has(std::string(r.hf) + ".weight")) {
      linear(r.ours, r.hf);
    } else {
      out.initialized.push_back(std::string(r.ours) + ".weight");
      out.initialized.push_back(std::string(r.ours) + ".bias");
    }
  }
  t.drop_if([](const std::string& n) { return n == "embeddings.position_ids"; });
  t.expect_empty();
  load_state_strict(*out.model, s, source);
  out.model->eval();
  return out;
}

HfModel import_gpt2(const nlohmann::json& c, const TensorMap& tensors, const std::string& source,
                    const std::string& csrc) {
  ModelConfig cfg;
  cfg.arch = Arch::DecoderLM;
  cfg.vocab_size = req_int(c, "vocab_size", csrc);
  cfg.d_model = req_int(c, "n_embd", csrc);
  cfg.n_heads = req_int(c, "n_head", csrc);
  cfg.n_decoder_layers = req_int(c, "n_layer", csrc);
  // 4 x n_embd by default (n_embd is bounded first, so the product cannot overflow).
  cfg.d_ff = opt_int(c, "n_inner", cfg.d_model > 0 && cfg.d_model <= ConfigLimits::dim ? 4 * cfg.d_model : cfg.d_model, csrc);
  cfg.max_positions = req_int(c, "n_positions", csrc);
  cfg.layer_norm_eps = opt_num(c, "layer_norm_epsilon", 1e-5, csrc);
  cfg.dropout = opt_num(c, "resid_pdrop", 0.1, csrc);
  cfg.attention_dropout = opt_num(c, "attn_pdrop", 0.1, csrc);
  cfg.activation = parse_hf_activation(opt_str(c, "activation_function", "gelu_new", csrc), csrc);
  if (!opt_bool(c, "scale_attn_weights", true, csrc)) fail(csrc, "scale_attn_weights false is not supported");
  if (opt_bool(c, "scale_attn_by_inverse_layer_idx", false, csrc))
    fail(csrc, "scale_attn_by_inverse_layer_idx true is not supported");
  if (cfg.n_heads <= 0 || cfg.d_model % cfg.n_heads != 0) fail(csrc, "n_embd must be a multiple of n_head");
  const int64_t eos = opt_int(c, "eos_token_id", 0, csrc);
  cfg.pad_id = eos >= 0 && eos < cfg.vocab_size ? eos : 0;
  cfg.positional = Positional::Learned;
  cfg.norm = NormPosition::Pre;
  cfg.embed_layer_norm = false;

  const bool prefixed =
      std::any_of(tensors.begin(), tensors.end(), [](const auto& kv) { return kv.first.rfind("transformer.", 0) == 0; });
  HfTensors t(tensors, prefixed ? "transformer." : "", source);
  torch::Tensor lm_head;
  if (t.has("lm_head.weight")) lm_head = t.take("lm_head.weight");
  cfg.tie_embeddings = true;
  cfg.decoder_self_heads = kept_from_pruned(c, cfg.n_decoder_layers, cfg.n_heads, csrc);
  try {
    cfg.finalize();
  } catch (const std::invalid_argument& e) {
    fail(csrc, e.what());
  }
  const int64_t C = cfg.d_model;
  auto wte = t.take("wte.weight", {cfg.vocab_size, C});
  if (lm_head.defined() && !(lm_head.sizes() == wte.sizes() && torch::equal(lm_head.to(torch::kFloat), wte))) {
    cfg.tie_embeddings = false;
    cfg.finalize();
  }
  check_tensors_fit(cfg, tensors, source);  // before anything is allocated
  HfModel out;
  out.model_type = "gpt2";
  out.config = c;
  out.model = Transformer(cfg);
  TensorMap s = state_dict(*out.model);
  s["decoder.embed_tokens.weight"] = wte;
  if (!cfg.tie_embeddings) s["lm_head.weight"] = lm_head;
  s["decoder.embed_positions.weight"] = t.take("wpe.weight", {cfg.max_positions, C});
  auto norm = [&](const std::string& ours, const std::string& hf) {
    s[ours + ".weight"] = t.take(hf + ".weight", {C});
    s[ours + ".bias"] = t.take(hf + ".bias", {C});
  };
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    const std::string hf = gpt2_layer(l, true), ours = gpt2_layer(l, false);
    // c_attn holds [q | k | v] of the kept heads, each as wide as the geometry says.
    const HeadGeometry g = head_geometry(cfg, AttnType::DecoderSelf, l);
    const int64_t widths[3] = {g.q_width(), g.kv_width(), g.kv_width()};
    const int64_t total = widths[0] + widths[1] + widths[2];
    for (const auto& r : kGpt2LayerNorms) norm(ours + r.ours, hf + r.hf);
    auto w = t.take(hf + "attn.c_attn.weight", {C, total});  // Conv1D: [in, out]
    auto b = t.take(hf + "attn.c_attn.bias", {total});
    for (int64_t k = 0, off = 0; k < 3; off += widths[k], ++k) {
      s[ours + kGpt2Qkv[k] + ".weight"] = w.slice(1, off, off + widths[k]).t().contiguous();
      s[ours + kGpt2Qkv[k] + ".bias"] = b.slice(0, off, off + widths[k]).contiguous();
    }
    for (const auto& r : kGpt2LayerConv1D) {
      const auto& ours_w = s.at(ours + r.ours + ".weight");  // [out, in] as built from the config
      s[ours + r.ours + ".weight"] =
          t.take(hf + r.hf + ".weight", {ours_w.size(1), ours_w.size(0)}).t().contiguous();
      s[ours + r.ours + ".bias"] = t.take(hf + r.hf + ".bias", {ours_w.size(0)});
    }
  }
  norm("decoder.final_norm", "ln_f");
  // Causal-mask buffers of older files.
  t.drop_if([](const std::string& n) { return ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias"); });
  t.expect_empty();
  load_state_strict(*out.model, s, source);
  out.model->eval();
  return out;
}

}  // namespace

bool is_hf_dir(const std::string& dir) {
  const std::string path = join_path(dir, kConfigFile);
  if (!is_file(path)) return false;
  try {
    const auto j = read_json_file(path);
    return j.is_object() && j.contains("model_type") && !j.contains("format");
  } catch (const std::runtime_error&) {
    return false;
  }
}

HfModel import_hf(const nlohmann::json& config, const TensorMap& tensors, const std::string& source,
                  const std::string& config_source) {
  if (!config.is_object() || !config.contains("model_type") || !config.at("model_type").is_string())
    fail(config_source, "no model_type (a string such as \"bert\" or \"gpt2\")");
  const auto type = config.at("model_type").get<std::string>();
  if (type == "bert") return import_bert(config, tensors, source, config_source);
  if (type == "gpt2") return import_gpt2(config, tensors, source, config_source);
  fail(config_source, "model_type '" + type + "' is not supported (bert, gpt2)");
}

HfModel import_hf(const std::string& dir) {
  const std::string cpath = join_path(dir, kConfigFile);
  if (!is_file(cpath)) throw std::runtime_error("HF checkpoint '" + dir + "': missing config.json");
  const nlohmann::json config = read_json_file(cpath);
  const std::string wpath = join_path(dir, kWeightsFile);
  if (!is_file(wpath)) {
    if (is_file(join_path(dir, "pytorch_model.bin")))
      throw std::runtime_error(
          "HF checkpoint '" + dir + "' has only pytorch_model.bin: headprune reads safetensors only (LibTorch "
          "cannot unpickle HF's state dict from C++, and unpickling runs code). Convert it once in Python: "
          "from safetensors.torch import save_file; import torch; "
          "save_file(torch.load('pytorch_model.bin', weights_only=True), 'model.safetensors') "
          "(weights_only=True: never unpickle a downloaded file without it)");
    throw std::runtime_error("HF checkpoint '" + dir + "': missing model.safetensors");
  }
  // Errors name the file at fault: config.json for its fields, model.safetensors for its tensors.
  return import_hf(config, read_safetensors(wpath).tensors, wpath, cpath);
}

HfExport to_hf(TransformerImpl& model_in, const nlohmann::json& base_config) {
  Transformer pruned{nullptr};
  TransformerImpl* m = &model_in;
  if (const auto masked = model_in.masked_heads(); !masked.empty()) {
    pruned = remove_heads(model_in, masked);  // HF files have no masks: masked heads leave physically
    m = pruned.get();
  }
  const ModelConfig& cfg = m->config();
  auto bad = [](const std::string& w) { throw std::invalid_argument("HF export: " + w); };
  if (cfg.positional != Positional::Learned) bad("HF's BERT and GPT-2 have learned positions, not sinusoidal");
  if (cfg.head_dim * cfg.n_heads != cfg.d_model) bad("head_dim * n_heads must equal d_model");
  if (cfg.effective_kv_heads() != cfg.n_heads || !cfg.qkv_bias || !cfg.o_bias)
    bad("HF's BERT and GPT-2 have one key/value head per query head and biases on every projection (n_kv_heads " +
        std::to_string(cfg.effective_kv_heads()) + ", n_heads " + std::to_string(cfg.n_heads) + ")");
  TensorMap s = state_dict(*m);
  HfExport out;
  nlohmann::json c = base_config.is_object() ? base_config : nlohmann::json::object();
  nlohmann::json pruned_heads = nlohmann::json::object();
  auto record_pruned = [&](const std::vector<std::vector<int64_t>>& kept) {
    for (size_t l = 0; l < kept.size(); ++l) {
      nlohmann::json ids = nlohmann::json::array();
      for (int64_t h = 0; h < cfg.n_heads; ++h)
        if (std::find(kept[l].begin(), kept[l].end(), h) == kept[l].end()) ids.push_back(h);
      if (!ids.empty()) pruned_heads[std::to_string(l)] = ids;
    }
  };
  auto get = [&](const std::string& n) { return s.at(n).contiguous(); };
  if (cfg.arch == Arch::EncoderClassifier) {
    if (cfg.norm != NormPosition::Post || !cfg.embed_layer_norm || cfg.n_segments < 1)
      bad("a BERT needs post-LayerNorm, a LayerNorm after the embeddings and segment embeddings");
    if (c.value("model_type", std::string("bert")) != "bert") c = nlohmann::json::object();
    c["model_type"] = "bert";
    c["architectures"] = {"BertForSequenceClassification"};
    c["vocab_size"] = cfg.vocab_size;
    c["hidden_size"] = cfg.d_model;
    c["num_hidden_layers"] = cfg.n_encoder_layers;
    c["num_attention_heads"] = cfg.n_heads;
    c["intermediate_size"] = cfg.d_ff;
    c["hidden_act"] = hf_activation(cfg.activation);
    c["max_position_embeddings"] = cfg.max_positions;
    c["type_vocab_size"] = cfg.n_segments;
    c["layer_norm_eps"] = cfg.layer_norm_eps;
    c["hidden_dropout_prob"] = cfg.dropout;
    c["attention_probs_dropout_prob"] = cfg.attention_dropout;
    c["pad_token_id"] = cfg.pad_id;
    c["position_embedding_type"] = "absolute";
    if (!c.contains("id2label") || c.at("id2label").size() != static_cast<size_t>(cfg.n_classes)) {
      c["id2label"] = nlohmann::json::object();
      c["label2id"] = nlohmann::json::object();
      for (int64_t k = 0; k < cfg.n_classes; ++k) {
        c["id2label"][std::to_string(k)] = "LABEL_" + std::to_string(k);
        c["label2id"]["LABEL_" + std::to_string(k)] = k;
      }
    }
    record_pruned(cfg.encoder_self_heads);
    auto& t = out.tensors;
    auto linear = [&](const std::string& hf, const std::string& ours) {
      t[hf + ".weight"] = get(ours + ".weight");
      t[hf + ".bias"] = get(ours + ".bias");
    };
    for (const auto& r : kBertEmbeddings) t["bert." + std::string(r.hf) + ".weight"] = get(std::string(r.ours) + ".weight");
    linear("bert." + std::string(kBertEmbeddingNorm.hf), kBertEmbeddingNorm.ours);
    for (int64_t l = 0; l < cfg.n_encoder_layers; ++l)
      for (const auto& r : kBertLayer) linear("bert." + bert_layer(l, true) + r.hf, bert_layer(l, false) + r.ours);
    for (const auto& r : kBertHeads)
      linear((std::string(r.ours) == "classifier" ? "" : "bert.") + std::string(r.hf), r.ours);
  } else if (cfg.arch == Arch::DecoderLM) {
    if (cfg.norm != NormPosition::Pre || cfg.embed_layer_norm)
      bad("a GPT-2 needs pre-LayerNorm and no LayerNorm after the embeddings");
    if (c.value("model_type", std::string("gpt2")) != "gpt2") c = nlohmann::json::object();
    c["model_type"] = "gpt2";
    c["architectures"] = {"GPT2LMHeadModel"};
    c["vocab_size"] = cfg.vocab_size;
    c["n_embd"] = cfg.d_model;
    c["n_layer"] = cfg.n_decoder_layers;
    c["n_head"] = cfg.n_heads;
    c["n_inner"] = cfg.d_ff;
    c["n_positions"] = cfg.max_positions;
    c["activation_function"] = hf_activation(cfg.activation);
    c["layer_norm_epsilon"] = cfg.layer_norm_eps;
    c["resid_pdrop"] = cfg.dropout;
    c["attn_pdrop"] = cfg.attention_dropout;
    c["scale_attn_weights"] = true;
    c["tie_word_embeddings"] = cfg.tie_embeddings;
    record_pruned(cfg.decoder_self_heads);
    auto& t = out.tensors;
    t["transformer.wte.weight"] = get("decoder.embed_tokens.weight");
    t["transformer.wpe.weight"] = get("decoder.embed_positions.weight");
    if (!cfg.tie_embeddings) t["lm_head.weight"] = get("lm_head.weight");
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
      const std::string hf = "transformer." + gpt2_layer(l, true), ours = gpt2_layer(l, false);
      for (const auto& r : kGpt2LayerNorms) {
        t[hf + r.hf + ".weight"] = get(ours + r.ours + ".weight");
        t[hf + r.hf + ".bias"] = get(ours + r.ours + ".bias");
      }
      std::vector<torch::Tensor> w, b;
      for (const char* m : kGpt2Qkv) {
        w.push_back(get(ours + m + ".weight").t());
        b.push_back(get(ours + m + ".bias"));
      }
      t[hf + "attn.c_attn.weight"] = torch::cat(w, 1).contiguous();
      t[hf + "attn.c_attn.bias"] = torch::cat(b);
      for (const auto& r : kGpt2LayerConv1D) {
        t[hf + r.hf + ".weight"] = get(ours + r.ours + ".weight").t().contiguous();
        t[hf + r.hf + ".bias"] = get(ours + r.ours + ".bias");
      }
    }
    t["transformer.ln_f.weight"] = get("decoder.final_norm.weight");
    t["transformer.ln_f.bias"] = get("decoder.final_norm.bias");
  } else {
    bad("encoder_decoder models have no HF export (BERT and GPT-2 only)");
  }
  c["pruned_heads"] = pruned_heads;
  out.config = c;
  return out;
}

void export_hf(const std::string& dir, TransformerImpl& model, const nlohmann::json& base_config) {
  const auto e = to_hf(model, base_config);
  make_directories(dir);
  write_safetensors(join_path(dir, kWeightsFile), e.tensors, {{"format", "pt"}});
  write_json_file(join_path(dir, kConfigFile), e.config);
}

}  // namespace hp
