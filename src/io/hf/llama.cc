// The LLaMA family: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (Phi-3 and Qwen3 in
// files of their own). A decoder LM with
// rotary positions, pre-RMSNorm, a gated (SwiGLU) feed-forward and grouped-query attention; an
// optional "model." prefix on everything but lm_head. Biases: Llama's attention_bias puts one on q,
// k, v and o and its mlp_bias on the three feed-forward projections; Qwen2 always has them on q, k
// and v and never on o; Mistral has a sliding window. HF has no pruned_heads for these (one head
// count for every layer): the export is dense (io/hf.h).
#include "llama_block.h"

namespace hp::hf_detail {

namespace {

// rope_scaling (transformers v4) or rope_parameters (v5; may also hold rope_theta).
void read_rope(const JsonFields& c, ModelConfig& cfg) {
  std::unique_ptr<JsonFields> r;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!c.has(key)) continue;
    if (!c.at(key).is_object()) c.fail(key, "must be an object or null");
    r = std::make_unique<JsonFields>(c.object(key));
    cfg.rope_theta = r->opt_num("rope_theta", cfg.rope_theta);
  }
  if (!r) return;
  const std::string type = r->has("rope_type") ? r->opt_str("rope_type", "default") : r->opt_str("type", "default");
  auto& s = cfg.rope_scaling;
  if (type == "default") {
    s.type = RopeScalingType::Default;
  } else if (type == "linear") {
    s.type = RopeScalingType::Linear;
    s.factor = r->opt_num("factor", 0.0);
  } else if (type == "llama3") {
    s.type = RopeScalingType::Llama3;
    s.factor = r->opt_num("factor", 0.0);
    s.low_freq_factor = r->opt_num("low_freq_factor", 0.0);
    s.high_freq_factor = r->opt_num("high_freq_factor", 0.0);
    s.original_max_positions = r->opt_int("original_max_position_embeddings", 0);
  } else {
    fail(c.source(), "rope_scaling type '" + type + "' is not supported (default, linear, llama3)");
  }
}

nlohmann::json rope_json(const ModelConfig& cfg) {
  const auto& s = cfg.rope_scaling;
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

std::vector<HfConfigKey> llama_block_keys() {
  return {
      hf_key("vocab_size", &ModelConfig::vocab_size),
      hf_key("hidden_size", &ModelConfig::d_model),
      hf_key("intermediate_size", &ModelConfig::d_ff),
      hf_key("num_hidden_layers", &ModelConfig::n_decoder_layers),
      hf_key("num_attention_heads", &ModelConfig::n_heads),
      {"num_key_value_heads",
       [](const JsonFields& c, ModelConfig& cfg) {
         cfg.n_kv_heads = c.opt_int("num_key_value_heads", cfg.n_heads);
         if (cfg.n_heads <= 0 || cfg.n_kv_heads <= 0 || cfg.n_heads % cfg.n_kv_heads != 0)
           fail(c.source(), "num_attention_heads " + std::to_string(cfg.n_heads) +
                                " is not a multiple of num_key_value_heads " + std::to_string(cfg.n_kv_heads) +
                                " (every key/value head serves the same number of query heads)");
         if (cfg.n_kv_heads == cfg.n_heads) cfg.n_kv_heads = 0;
       },
       [](const ModelConfig& cfg) { return nlohmann::json(cfg.effective_kv_heads()); }},
      {"head_dim",
       [](const JsonFields& c, ModelConfig& cfg) {
         const int64_t derived = cfg.n_heads > 0 && cfg.d_model % cfg.n_heads == 0 ? cfg.d_model / cfg.n_heads : 0;
         cfg.head_dim = c.opt_int("head_dim", derived);
         if (cfg.head_dim <= 0)
           fail(c.source(), "no head_dim, and hidden_size " + std::to_string(cfg.d_model) +
                                " is not a multiple of num_attention_heads");
       },
       [](const ModelConfig& cfg) { return nlohmann::json(cfg.head_dim); }},
      hf_key("max_position_embeddings", &ModelConfig::max_positions, 2048),
      hf_key("rms_norm_eps", &ModelConfig::layer_norm_eps, 1e-6),
      hf_activation_key("hidden_act", "silu"),
      hf_key("attention_dropout", &ModelConfig::attention_dropout, 0.0),
      hf_key("tie_word_embeddings", &ModelConfig::tie_embeddings, false),
      hf_key("rope_theta", &ModelConfig::rope_theta, 10000.0),
      {"rope_scaling", read_rope, rope_json},
      {"pad_token_id",  // else the end-of-sequence id, else 0; written by extras only when the base lacks it
       [](const JsonFields& c, ModelConfig& cfg) {
         const int64_t pad = c.opt_int("pad_token_id", -1), eos = c.opt_int("eos_token_id", -1);
         cfg.pad_id = pad >= 0 && pad < cfg.vocab_size ? pad : (eos >= 0 && eos < cfg.vocab_size ? eos : 0);
       },
       {}},
  };
}

HfConfigKey attention_bias_key() {
  return {"attention_bias",
          [](const JsonFields& c, ModelConfig& cfg) { cfg.qkv_bias = cfg.o_bias = c.opt_bool("attention_bias", false); },
          [](const ModelConfig& cfg) { return nlohmann::json(cfg.qkv_bias); }};
}

HfConfigKey use_sliding_window_key() {
  return {"use_sliding_window",  // a window on some layers only is not supported
          [](const JsonFields& c, ModelConfig& cfg) {
            if (!c.opt_bool("use_sliding_window", false)) return;
            if (c.opt_int("max_window_layers", cfg.n_decoder_layers) < cfg.n_decoder_layers)
              fail(c.source(), "use_sliding_window with max_window_layers < num_hidden_layers (a window "
                               "on some layers only) is not supported");
          },
          [](const ModelConfig&) { return nlohmann::json(false); }};
}

std::vector<HfTensorName> llama_block_tensor_names() {
  using S = HfScope;
  const std::string hf = "layers.{L}.", ours = "decoder.layers.{L}.";
  std::vector<HfTensorName> t = {{S::Model, "embed_tokens", {"decoder.embed_tokens"}}};
  for (const auto& [h, o] : std::vector<std::pair<std::string, std::string>>{
           {"self_attn.q_proj", "self_attn.q_proj"}, {"self_attn.k_proj", "self_attn.k_proj"},
           {"self_attn.v_proj", "self_attn.v_proj"}, {"self_attn.o_proj", "self_attn.o_proj"},
           {"mlp.gate_proj", "ffn.gate"},             {"mlp.up_proj", "ffn.fc1"},
           {"mlp.down_proj", "ffn.fc2"},              {"input_layernorm", "self_attn_norm"},
           {"post_attention_layernorm", "ffn_norm"}})
    t.push_back({S::DecoderLayer, hf + h, {ours + o}});
  t.push_back({S::Model, "norm", {"decoder.final_norm"}});
  t.push_back({S::Model, "lm_head", {"lm_head"}, HfStorage::Linear, HfPresence::Untied, /*prefixed=*/false});
  return t;
}

HfConfigKey sliding_window_key() {
  return {"sliding_window", [](const JsonFields& c, ModelConfig& cfg) { cfg.sliding_window = c.opt_int("sliding_window", 0); },
          [](const ModelConfig& cfg) {
            return cfg.sliding_window > 0 ? nlohmann::json(cfg.sliding_window) : nlohmann::json(nullptr);
          }};
}

void llama_block_configure(const JsonFields&, HfTensors&, ModelConfig& cfg) {
  cfg.arch = Arch::DecoderLM;
  cfg.dropout = cfg.activation_dropout = 0.0;
  cfg.positional = Positional::Rotary;
  cfg.norm = NormPosition::Pre;
  cfg.norm_kind = NormKind::RmsNorm;
  cfg.embed_layer_norm = false;
  cfg.gated_ffn = true;
}

void llama_block_finish(const ModelConfig& cfg, HfTensors& t, TensorMap& s) {
  if (!cfg.tie_embeddings || !t.has("lm_head.weight")) return;
  const auto lm_head = t.take("lm_head.weight");
  const auto& embed = s.at("decoder.embed_tokens.weight");
  if (!torch::equal(lm_head.to(embed.scalar_type()), embed))
    fail(t.source(), "tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight");
}

void llama_block_check(const ModelConfig& cfg) {
  if (cfg.arch != Arch::DecoderLM) llama_block_bad("needs a decoder LM (arch decoder_lm)");
  if (cfg.norm != NormPosition::Pre || cfg.norm_kind != NormKind::RmsNorm)
    llama_block_bad("needs pre-RMSNorm layers (norm pre, norm_kind rms_norm)");
  if (!cfg.gated_ffn) llama_block_bad("needs a gated (SwiGLU) feed-forward (gated_ffn)");
  if (cfg.embed_layer_norm) llama_block_bad("has no norm after the embeddings (embed_layer_norm)");
}

std::set<std::string> llama_block_config_fields(std::initializer_list<const char*> more) {
  auto f = config_fields_with({"n_decoder_layers", "n_kv_heads", "positional", "rope_theta", "rope_scaling", "norm",
                               "norm_kind", "gated_ffn", "embed_layer_norm", "qkv_bias", "o_bias", "mlp_bias"});
  f.insert(more.begin(), more.end());
  return f;
}

void llama_block_bad(const std::string& w) { throw std::invalid_argument("HF export (LLaMA family): " + w); }

void llama_block_extras(const ModelConfig& cfg, const TransformerImpl& model, nlohmann::json& c) {
  const auto dtype = model.parameters().front().scalar_type();
  c["torch_dtype"] = dtype == torch::kBFloat16 ? "bfloat16" : dtype == torch::kHalf ? "float16" : "float32";
  if (!c.contains("pad_token_id")) c["pad_token_id"] = cfg.pad_id;
}

bool llama_block_fits(const ModelConfig& cfg) { return cfg.positional == Positional::Rotary; }

namespace {

bool qwen2_biases(const ModelConfig& cfg) { return cfg.qkv_bias && !cfg.o_bias; }

}  // namespace

HfFamily llama_block_member(std::string model_type, std::string architecture) {
  HfFamily f;
  f.model_type = std::move(model_type);
  f.architecture = std::move(architecture);
  f.prefix = "model.";
  f.keys = llama_block_keys();
  f.config_fields = llama_block_config_fields({});
  f.tensors = llama_block_tensor_names();
  f.ignorable = {".rotary_emb.inv_freq"};  // rotary tables some older files carry
  f.deferred_init = true;
  f.fits = llama_block_fits;
  f.configure = llama_block_configure;
  f.finish = llama_block_finish;
  f.check = llama_block_check;
  f.extras = llama_block_extras;
  return f;
}

}  // namespace hp::hf_detail

namespace hp::hf::llama {

const HfFamily& family() {
  using namespace hf_detail;
  static const HfFamily f = [] {
    HfFamily f = llama_block_member("llama", "LlamaForCausalLM");
    f.keys.push_back(attention_bias_key());
    f.keys.push_back(hf_key("mlp_bias", &ModelConfig::mlp_bias, false));
    f.guess = [](const ModelConfig& cfg) { return !cfg.qk_norm && cfg.sliding_window == 0 && !qwen2_biases(cfg); };
    f.check = [](const ModelConfig& cfg) {
      llama_block_check(cfg);
      if (cfg.qkv_bias != cfg.o_bias) llama_block_bad("Llama has attention biases on all of q, k, v and o or on none (attention_bias: qkv_bias = o_bias)");
    };
    return f;
  }();
  return f;
}

}  // namespace hp::hf::llama

namespace hp::hf::mistral {

const HfFamily& family() {
  using namespace hf_detail;
  static const HfFamily f = [] {
    HfFamily f = llama_block_member("mistral", "MistralForCausalLM");
    f.keys.push_back(attention_bias_key());
    f.keys.push_back({"mlp_bias", [](const JsonFields& c, ModelConfig& cfg) { cfg.mlp_bias = c.opt_bool("mlp_bias", false); }, {}});
    f.keys.push_back(sliding_window_key());
    f.config_fields.insert("sliding_window");
    f.guess = [](const ModelConfig& cfg) { return !cfg.qk_norm && cfg.sliding_window > 0; };
    f.check = [](const ModelConfig& cfg) {
      llama_block_check(cfg);
      if (cfg.qkv_bias != cfg.o_bias) llama_block_bad("Mistral has attention biases on all of q, k, v and o or on none (attention_bias: qkv_bias = o_bias)");
      if (cfg.mlp_bias) llama_block_bad("Mistral has no feed-forward biases (mlp_bias)");
    };
    return f;
  }();
  return f;
}

}  // namespace hp::hf::mistral

namespace hp::hf::qwen2 {

const HfFamily& family() {
  using namespace hf_detail;
  static const HfFamily f = [] {
    HfFamily f = llama_block_member("qwen2", "Qwen2ForCausalLM");
    f.keys.push_back(use_sliding_window_key());
    f.configure = [](const JsonFields& c, HfTensors& t, ModelConfig& cfg) {
      llama_block_configure(c, t, cfg);
      cfg.qkv_bias = true;  // always on q, k and v, never on o or the feed-forward
      cfg.o_bias = cfg.mlp_bias = false;
    };
    f.guess = [](const ModelConfig& cfg) { return !cfg.qk_norm && cfg.sliding_window == 0 && qwen2_biases(cfg); };
    f.check = [](const ModelConfig& cfg) {
      llama_block_check(cfg);
      if (!(qwen2_biases(cfg) && !cfg.mlp_bias)) llama_block_bad("Qwen2 has biases on q, k and v only (qkv_bias true, o_bias and mlp_bias false)");
    };
    return f;
  }();
  return f;
}

}  // namespace hp::hf::qwen2
