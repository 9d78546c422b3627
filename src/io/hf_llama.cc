// HuggingFace LLaMA-family checkpoints (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM):
// import into a decoder LM with rotary positions, RMSNorm, a gated (SwiGLU) feed-forward and
// grouped-query attention, and the dense masked export (see io/hf.h).
//
// Names (an optional "model." prefix on everything but lm_head):
//   model.embed_tokens                      decoder.embed_tokens
//   model.layers.L.self_attn.{q,k,v,o}_proj decoder.layers.L.self_attn.{q,k,v,o}_proj
//   model.layers.L.mlp.gate_proj            decoder.layers.L.ffn.gate
//   model.layers.L.mlp.up_proj              decoder.layers.L.ffn.fc1
//   model.layers.L.mlp.down_proj            decoder.layers.L.ffn.fc2
//   model.layers.L.input_layernorm          decoder.layers.L.self_attn_norm
//   model.layers.L.post_attention_layernorm decoder.layers.L.ffn_norm
//   model.norm                              decoder.final_norm
//   lm_head                                 lm_head (absent when tie_word_embeddings)
// Biases: Llama's attention_bias puts one on q, k, v and o; Qwen2 always has them on q, k and v and
// never on o; mlp_bias (Llama) on the three feed-forward projections.
#include <cmath>
#include <set>
#include <stdexcept>

#include "headprune/io/checkpoint.h"
#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "hf_detail.h"

namespace hp::hf_detail {

namespace {

struct LinearName {
  const char* hf;
  const char* ours;
};
constexpr LinearName kAttention[] = {{"self_attn.q_proj", "self_attn.q_proj"},
                                     {"self_attn.k_proj", "self_attn.k_proj"},
                                     {"self_attn.v_proj", "self_attn.v_proj"},
                                     {"self_attn.o_proj", "self_attn.o_proj"}};
constexpr LinearName kMlp[] = {{"mlp.gate_proj", "ffn.gate"}, {"mlp.up_proj", "ffn.fc1"}, {"mlp.down_proj", "ffn.fc2"}};
constexpr LinearName kNorms[] = {{"input_layernorm", "self_attn_norm"}, {"post_attention_layernorm", "ffn_norm"}};

std::string hf_layer(int64_t l) { return "layers." + std::to_string(l) + "."; }
std::string our_layer(int64_t l) { return "decoder.layers." + std::to_string(l) + "."; }

// rope_theta and rope_scaling (transformers v4) or rope_parameters (v5), into the config.
void read_rope(const nlohmann::json& c, ModelConfig& cfg, const std::string& csrc) {
  nlohmann::json r = nlohmann::json::object();
  cfg.rope_theta = opt_num(c, "rope_theta", 10000.0, csrc);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!c.contains(key) || c.at(key).is_null()) continue;
    if (!c.at(key).is_object()) fail(csrc, std::string("config field '") + key + "' must be an object or null");
    r = c.at(key);
    if (r.contains("rope_theta")) cfg.rope_theta = opt_num(r, "rope_theta", cfg.rope_theta, csrc);
  }
  const std::string type = r.contains("rope_type") ? opt_str(r, "rope_type", "default", csrc)
                                                   : opt_str(r, "type", "default", csrc);
  auto& s = cfg.rope_scaling;
  if (type == "default") {
    s.type = RopeScalingType::Default;
  } else if (type == "linear") {
    s.type = RopeScalingType::Linear;
    s.factor = opt_num(r, "factor", 0.0, csrc);
  } else if (type == "llama3") {
    s.type = RopeScalingType::Llama3;
    s.factor = opt_num(r, "factor", 0.0, csrc);
    s.low_freq_factor = opt_num(r, "low_freq_factor", 0.0, csrc);
    s.high_freq_factor = opt_num(r, "high_freq_factor", 0.0, csrc);
    s.original_max_positions = opt_int(r, "original_max_position_embeddings", 0, csrc);
  } else {
    fail(csrc, "rope_scaling type '" + type + "' is not supported (default, linear, llama3)");
  }
}

nlohmann::json rope_json(const RopeScaling& s) {
  switch (s.type) {
    case RopeScalingType::Default: return nullptr;
    case RopeScalingType::Linear: return {{"rope_type", "linear"}, {"factor", s.factor}};
    case RopeScalingType::Llama3:
      return {{"rope_type", "llama3"},
              {"factor", s.factor},
              {"low_freq_factor", s.low_freq_factor},
              {"high_freq_factor", s.high_freq_factor},
              {"original_max_position_embeddings", s.original_max_positions}};
  }
  return nullptr;
}

}  // namespace

bool is_llama_family(const std::string& t) { return t == "llama" || t == "qwen2" || t == "mistral"; }

HfModel import_llama_family(const nlohmann::json& c, const TensorMap& tensors, const std::string& source,
                            const std::string& csrc, const LoadOptions& lo) {
  const std::string type = c.at("model_type").get<std::string>();
  ModelConfig cfg;
  cfg.arch = Arch::DecoderLM;
  cfg.vocab_size = req_int(c, "vocab_size", csrc);
  cfg.d_model = req_int(c, "hidden_size", csrc);
  cfg.d_ff = req_int(c, "intermediate_size", csrc);
  cfg.n_decoder_layers = req_int(c, "num_hidden_layers", csrc);
  cfg.n_heads = req_int(c, "num_attention_heads", csrc);
  cfg.n_kv_heads = opt_int(c, "num_key_value_heads", cfg.n_heads, csrc);
  if (cfg.n_heads <= 0 || cfg.n_kv_heads <= 0 || cfg.n_heads % cfg.n_kv_heads != 0)
    fail(csrc, "num_attention_heads " + std::to_string(cfg.n_heads) + " is not a multiple of num_key_value_heads " +
                   std::to_string(cfg.n_kv_heads) + " (every key/value head serves the same number of query heads)");
  if (cfg.n_kv_heads == cfg.n_heads) cfg.n_kv_heads = 0;
  const int64_t derived_head_dim = cfg.n_heads > 0 && cfg.d_model % cfg.n_heads == 0 ? cfg.d_model / cfg.n_heads : 0;
  cfg.head_dim = opt_int(c, "head_dim", derived_head_dim, csrc);
  if (cfg.head_dim <= 0)
    fail(csrc, "no head_dim, and hidden_size " + std::to_string(cfg.d_model) + " is not a multiple of num_attention_heads");
  cfg.max_positions = opt_int(c, "max_position_embeddings", 2048, csrc);
  cfg.layer_norm_eps = opt_num(c, "rms_norm_eps", 1e-6, csrc);
  cfg.activation = parse_hf_activation(opt_str(c, "hidden_act", "silu", csrc), csrc);
  cfg.dropout = cfg.activation_dropout = 0.0;
  cfg.attention_dropout = opt_num(c, "attention_dropout", 0.0, csrc);
  cfg.positional = Positional::Rotary;
  cfg.norm = NormPosition::Pre;
  cfg.norm_kind = NormKind::RmsNorm;
  cfg.embed_layer_norm = false;
  cfg.gated_ffn = true;
  cfg.tie_embeddings = opt_bool(c, "tie_word_embeddings", false, csrc);
  if (type == "qwen2") {
    cfg.qkv_bias = true;
    cfg.o_bias = false;
    cfg.mlp_bias = false;
    if (opt_bool(c, "use_sliding_window", false, csrc)) {
      const int64_t windowed_from = opt_int(c, "max_window_layers", cfg.n_decoder_layers, csrc);
      if (windowed_from < cfg.n_decoder_layers)
        fail(csrc, "use_sliding_window with max_window_layers < num_hidden_layers (a window on some layers only) is "
                   "not supported");
    }
  } else {
    cfg.qkv_bias = cfg.o_bias = opt_bool(c, "attention_bias", false, csrc);
    cfg.mlp_bias = opt_bool(c, "mlp_bias", false, csrc);
    if (type == "mistral") cfg.sliding_window = opt_int(c, "sliding_window", 0, csrc);
  }
  read_rope(c, cfg, csrc);
  const int64_t pad = opt_int(c, "pad_token_id", -1, csrc), eos = opt_int(c, "eos_token_id", -1, csrc);
  cfg.pad_id = pad >= 0 && pad < cfg.vocab_size ? pad : (eos >= 0 && eos < cfg.vocab_size ? eos : 0);
  try {
    cfg.finalize();
  } catch (const std::invalid_argument& e) {
    fail(csrc, e.what());
  }
  check_tensors_fit(cfg, tensors, source);  // before anything is allocated

  const bool prefixed =
      std::any_of(tensors.begin(), tensors.end(), [](const auto& kv) { return kv.first.rfind("model.", 0) == 0; });
  // lm_head has no prefix: take it out first so the prefix is stripped from the rest only.
  TensorMap body = tensors;
  torch::Tensor lm_head;
  if (auto it = body.find("lm_head.weight"); it != body.end()) {
    lm_head = it->second;
    body.erase(it);
  }
  HfTensors t(body, prefixed ? "model." : "", source);
  HfModel out;
  out.model_type = type;
  out.config = c;
  {
    DeferredInit deferred;  // every parameter comes from the file: build without allocating
    out.model = Transformer(cfg);
  }
  TensorMap s = state_dict(*out.model);
  auto put = [&](const std::string& ours, const std::string& hf) { s[ours] = t.take(hf, s.at(ours).sizes().vec()); };
  auto linear = [&](const std::string& ours, const std::string& hf) {
    put(ours + ".weight", hf + ".weight");
    if (s.count(ours + ".bias")) put(ours + ".bias", hf + ".bias");
  };
  put("decoder.embed_tokens.weight", "embed_tokens.weight");
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    for (const auto& r : kAttention) linear(our_layer(l) + r.ours, hf_layer(l) + r.hf);
    for (const auto& r : kMlp) linear(our_layer(l) + r.ours, hf_layer(l) + r.hf);
    for (const auto& r : kNorms) put(our_layer(l) + r.ours + ".weight", hf_layer(l) + r.hf + ".weight");
  }
  put("decoder.final_norm.weight", "norm.weight");
  if (!cfg.tie_embeddings) {
    if (!lm_head.defined()) fail(source, "missing tensor 'lm_head.weight' (tie_word_embeddings is false)");
    const auto want = s.at("lm_head.weight").sizes().vec();
    if (lm_head.sizes().vec() != want)
      fail(source, "tensor 'lm_head.weight' has shape " + shape_str(lm_head.sizes()) + ", expected " + shape_str(want));
    s["lm_head.weight"] = lm_head;
  } else if (const auto& embed = s.at("decoder.embed_tokens.weight");
             lm_head.defined() && !torch::equal(lm_head.to(embed.scalar_type()), embed)) {
    fail(source, "tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight");
  }
  // Rotary tables some older files carry.
  t.drop_if([](const std::string& n) { return ends_with(n, ".rotary_emb.inv_freq"); });
  t.expect_empty();
  load_state_strict(*out.model, s, source, lo.state());
  out.model->eval();
  return out;
}

HfExport to_hf_llama(TransformerImpl& model, const nlohmann::json& base_config) {
  const ModelConfig& cfg = model.config();
  auto bad = [](const std::string& w) { throw std::invalid_argument("HF export (LLaMA family): " + w); };
  if (cfg.arch != Arch::DecoderLM || cfg.norm != NormPosition::Pre || cfg.norm_kind != NormKind::RmsNorm ||
      !cfg.gated_ffn || cfg.embed_layer_norm)
    bad("needs a decoder LM with rotary positions, pre-RMSNorm and a gated feed-forward");
  std::string type = base_config.is_object() ? base_config.value("model_type", std::string()) : std::string();
  if (!is_llama_family(type))  // no HF config to go by (a model pruned or trained here): what its shape says
    type = cfg.sliding_window > 0 ? "mistral" : cfg.qkv_bias && !cfg.o_bias ? "qwen2" : "llama";
  if (type == "qwen2" && !(cfg.qkv_bias && !cfg.o_bias && !cfg.mlp_bias))
    bad("Qwen2 has biases on q, k and v only");
  if (type != "qwen2" && cfg.qkv_bias != cfg.o_bias)
    bad("Llama and Mistral have attention biases on all of q, k, v and o or on none (attention_bias)");
  if (type != "mistral" && cfg.sliding_window > 0) bad("only Mistral has a sliding window");
  if (type == "mistral" && cfg.mlp_bias) bad("Mistral has no feed-forward biases");

  nlohmann::json c = base_config.is_object() && base_config.value("model_type", std::string()) == type
                         ? base_config
                         : nlohmann::json::object();
  static const std::map<std::string, std::string> arch_of = {
      {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"mistral", "MistralForCausalLM"}};
  c["model_type"] = type;
  c["architectures"] = {arch_of.at(type)};
  c["vocab_size"] = cfg.vocab_size;
  c["hidden_size"] = cfg.d_model;
  c["intermediate_size"] = cfg.d_ff;
  c["num_hidden_layers"] = cfg.n_decoder_layers;
  c["num_attention_heads"] = cfg.n_heads;
  c["num_key_value_heads"] = cfg.effective_kv_heads();
  c["head_dim"] = cfg.head_dim;
  c["max_position_embeddings"] = cfg.max_positions;
  c["rms_norm_eps"] = cfg.layer_norm_eps;
  c["hidden_act"] = hf_activation(cfg.activation);
  c["rope_theta"] = cfg.rope_theta;
  c["rope_scaling"] = rope_json(cfg.rope_scaling);
  c["tie_word_embeddings"] = cfg.tie_embeddings;
  c["attention_dropout"] = cfg.attention_dropout;
  const auto dtype = model.parameters().front().scalar_type();  // written as held (a bf16 model stays bf16)
  c["torch_dtype"] = dtype == torch::kBFloat16 ? "bfloat16" : dtype == torch::kHalf ? "float16" : "float32";
  c.erase("pruned_heads");
  if (type == "qwen2") {
    c["use_sliding_window"] = false;
  } else {
    c["attention_bias"] = cfg.qkv_bias;
    if (type == "llama") c["mlp_bias"] = cfg.mlp_bias;
    if (type == "mistral") c["sliding_window"] = cfg.sliding_window > 0 ? nlohmann::json(cfg.sliding_window) : nullptr;
  }
  if (!c.contains("pad_token_id")) c["pad_token_id"] = cfg.pad_id;

  // Every layer back at the config's head counts (restore_head_shapes): a kept head's rows (q, and
  // k/v of its group) and o columns where they were, scaled by its mask; removed heads are zeros.
  HfExport out;
  auto& t = out.tensors;
  // The model's own tensors (views, no copies); each layer's attention is restored to the config's head
  // counts when its tensors are written, one tensor at a time.
  const auto s = std::make_shared<const TensorMap>(state_dict(model));
  auto get = [&](const std::string& n) { return LazyTensor::of(s->at(n)); };
  t["model.embed_tokens.weight"] = get("decoder.embed_tokens.weight");
  if (!cfg.tie_embeddings) t["lm_head.weight"] = get("lm_head.weight");
  t["model.norm.weight"] = get("decoder.final_norm.weight");
  const ModelConfig full = restored_config(cfg);
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    const std::string hf = "model." + hf_layer(l), ours = our_layer(l);
    const HeadGeometry g = head_geometry(full, AttnType::DecoderSelf, l);
    auto restored = [&](const std::string& n, std::vector<int64_t> shape) {
      return LazyTensor{dtype, std::move(shape), [s, cfg, l, n] {
                          return restore_layer_shapes(cfg, *s, AttnType::DecoderSelf, l).at(n).to(torch::kCPU).contiguous();
                        }};
    };
    const int64_t C = cfg.d_model, q = g.q_width(), kv = g.kv_width();
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      const std::string name = std::string("self_attn.") + proj, p = proj;
      const int64_t rows = p == "q_proj" ? q : p == "o_proj" ? C : kv;
      t[hf + name + ".weight"] = restored(ours + name + ".weight", {rows, p == "o_proj" ? q : C});
      if (cfg.qkv_bias && p != "o_proj") t[hf + name + ".bias"] = restored(ours + name + ".bias", {rows});
    }
    if (cfg.o_bias) t[hf + "self_attn.o_proj.bias"] = get(ours + "self_attn.o_proj.bias");
    for (const auto& r : kMlp) {
      t[hf + r.hf + ".weight"] = get(ours + r.ours + ".weight");
      if (cfg.mlp_bias) t[hf + r.hf + ".bias"] = get(ours + r.ours + ".bias");
    }
    for (const auto& r : kNorms) t[hf + r.hf + ".weight"] = get(ours + r.ours + ".weight");
  }
  out.config = c;
  return out;
}

}  // namespace hp::hf_detail
