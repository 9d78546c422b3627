// GPT-2 (GPT2Model, GPT2LMHeadModel): pre-LayerNorm decoder with learned positions; Conv1D
// projections ([in, out]) and q, k, v fused in attn.c_attn; the output embedding tied to the input
// one unless the file's lm_head differs from it.
#include "family.h"
#include "tensors.h"

namespace hp::hf::gpt2 {

namespace {

using hf_detail::fail;

void configure(const JsonFields& c, hf_detail::HfTensors& t, ModelConfig& cfg) {
  cfg.arch = Arch::DecoderLM;
  cfg.activation_dropout = 0.0;  // GPT2MLP drops after c_proj (resid_pdrop), not after the activation
  if (cfg.n_heads <= 0 || cfg.d_model % cfg.n_heads != 0) fail(c.source(), "n_embd must be a multiple of n_head");
  cfg.positional = Positional::Learned;
  cfg.norm = NormPosition::Pre;
  cfg.embed_layer_norm = false;
  cfg.decoder_self_heads = hf_detail::kept_from_pruned(c.json(), cfg.n_decoder_layers, cfg.n_heads, c.source());
  // Tied unless the file has an lm_head that differs from wte (a tied copy is dropped).
  const auto lm_head = t.peek("lm_head.weight"), wte = t.peek("wte.weight");
  cfg.tie_embeddings = !lm_head.defined() || (wte.defined() && lm_head.sizes() == wte.sizes() &&
                                              torch::equal(lm_head.to(wte.scalar_type()), wte));
  if (cfg.tie_embeddings && lm_head.defined()) t.take("lm_head.weight");
}

void check(const ModelConfig& cfg) {
  hf_detail::check_classic_block(cfg, "GPT-2");
  if (cfg.norm != NormPosition::Pre || cfg.embed_layer_norm)
    throw std::invalid_argument(
        "HF export: a GPT-2 needs pre-LayerNorm (norm pre) and no LayerNorm after the embeddings (embed_layer_norm)");
}

std::vector<HfTensorName> tensor_names() {
  using S = HfScope;
  const auto conv = HfStorage::Conv1D;
  return {{S::Model, "wte", {"decoder.embed_tokens"}},
          {S::Model, "wpe", {"decoder.embed_positions"}},
          {S::DecoderLayer, "h.{L}.ln_1", {"decoder.layers.{L}.self_attn_norm"}},
          {S::DecoderLayer, "h.{L}.ln_2", {"decoder.layers.{L}.ffn_norm"}},
          {S::DecoderLayer, "h.{L}.attn.c_attn",
           {"decoder.layers.{L}.self_attn.q_proj", "decoder.layers.{L}.self_attn.k_proj", "decoder.layers.{L}.self_attn.v_proj"},
           conv},
          {S::DecoderLayer, "h.{L}.attn.c_proj", {"decoder.layers.{L}.self_attn.o_proj"}, conv},
          {S::DecoderLayer, "h.{L}.mlp.c_fc", {"decoder.layers.{L}.ffn.fc1"}, conv},
          {S::DecoderLayer, "h.{L}.mlp.c_proj", {"decoder.layers.{L}.ffn.fc2"}, conv},
          {S::Model, "ln_f", {"decoder.final_norm"}},
          {S::Model, "lm_head", {"lm_head"}, HfStorage::Linear, HfPresence::Untied, /*prefixed=*/false}};
}

std::vector<HfConfigKey> keys() {
  return {hf_key("vocab_size", &ModelConfig::vocab_size),
          hf_key("n_embd", &ModelConfig::d_model),
          hf_key("n_head", &ModelConfig::n_heads),
          hf_key("n_layer", &ModelConfig::n_decoder_layers),
          // 4 x n_embd by default (n_embd is bounded first, so the product cannot overflow).
          {"n_inner",
           [](const JsonFields& c, ModelConfig& cfg) {
             cfg.d_ff = c.opt_int("n_inner", cfg.d_model > 0 && cfg.d_model <= ConfigLimits::dim ? 4 * cfg.d_model : cfg.d_model);
           },
           [](const ModelConfig& cfg) { return nlohmann::json(cfg.d_ff); }},
          hf_key("n_positions", &ModelConfig::max_positions),
          hf_key("layer_norm_epsilon", &ModelConfig::layer_norm_eps, 1e-5),
          hf_key("resid_pdrop", &ModelConfig::dropout, 0.1),
          hf_key("attn_pdrop", &ModelConfig::attention_dropout, 0.1),
          hf_activation_key("activation_function", "gelu_new"),
          hf_fixed_key("scale_attn_weights", true),
          hf_fixed_key("scale_attn_by_inverse_layer_idx", false, /*written=*/false),
          {"eos_token_id",  // the padding id: GPT-2 has no pad token
           [](const JsonFields& c, ModelConfig& cfg) {
             const int64_t eos = c.opt_int("eos_token_id", 0);
             cfg.pad_id = eos >= 0 && eos < cfg.vocab_size ? eos : 0;
           },
           {}},
          {"tie_word_embeddings", {}, [](const ModelConfig& cfg) { return nlohmann::json(cfg.tie_embeddings); }}};
}

}  // namespace

const HfFamily& family() {
  static const HfFamily f = [] {
    HfFamily f;
    f.model_type = "gpt2";
    f.architecture = "GPT2LMHeadModel";
    f.prefix = "transformer.";
    f.keys = keys();
    // Learned positions, LayerNorm, biases everywhere: the defaults, so not listed.
    f.config_fields = hf_detail::config_fields_with({"n_decoder_layers", "norm", "embed_layer_norm"});
    f.tensors = tensor_names();
    f.ignorable = {".attn.bias", ".attn.masked_bias"};  // causal-mask buffers of older files
    f.pruned_heads = true;
    f.fits = [](const ModelConfig& cfg) { return cfg.positional != Positional::Rotary && cfg.arch == Arch::DecoderLM; };
    f.guess = [](const ModelConfig&) { return true; };
    f.configure = configure;
    f.check = check;
    return f;
  }();
  return f;
}

}  // namespace hp::hf::gpt2
