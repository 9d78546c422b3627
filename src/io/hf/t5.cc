// T5 (T5ForConditionalGeneration: T5, Flan-T5, T5 v1.1): a pre-norm encoder-decoder with RMS-style
// layer norms without bias (T5LayerNorm), no positions on the embeddings but a learned bias per head
// and bucketed query-key distance on the self-attention scores (relative_attention_bias, held by
// block 0 of each stack and read by every layer: ModelConfig's positional "relative"), attention scores
// not scaled by 1/sqrt(d_kv), no biases anywhere, d_kv independent of d_model, a ReLU feed-forward
// (wi, wo) or a gated one (feed_forward_proj "gated-gelu": wi_0 through gelu_new times wi_1, then wo),
// one embedding table (shared) for both stacks, and an output tied to it that first scales the decoder
// output by d_model^-0.5 (v1.1 and Flan-T5 have their own lm_head and no rescale).
#include <cmath>

#include "family.h"
#include "tensors.h"

namespace hp::hf::t5 {

namespace {

using hf_detail::fail;
using hf_detail::HfTensors;
using M = ModelConfig;

// The feed-forward's sub-layer in a block: layer.1 in the encoder, layer.2 in the decoder.
std::string ffn_at(const std::string& stack, int64_t l) {
  return stack + ".block." + std::to_string(l) + ".layer." + (stack == "encoder" ? "1" : "2") + ".DenseReluDense.";
}

std::vector<HfTensorName> tensor_names() {
  using S = HfScope;
  std::vector<HfTensorName> rows;
  for (const auto& [scope, stack] : {std::pair<S, std::string>{S::EncoderLayer, "encoder"}, {S::DecoderLayer, "decoder"}}) {
    rows.push_back({S::Model, stack + ".block.0.layer.0.SelfAttention.relative_attention_bias",
                    {stack + ".relative_attention_bias"}});
    const std::string hf = stack + ".block.{L}.layer.", ours = stack + ".layers.{L}.";
    for (const char* p : {"q", "k", "v", "o"})
      rows.push_back({scope, hf + "0.SelfAttention." + p, {ours + "self_attn." + p + "_proj"}});
    rows.push_back({scope, hf + "0.layer_norm", {ours + "self_attn_norm"}});
    if (scope == S::DecoderLayer) {
      for (const char* p : {"q", "k", "v", "o"})
        rows.push_back({scope, hf + "1.EncDecAttention." + p, {ours + "cross_attn." + p + "_proj"}});
      rows.push_back({scope, hf + "1.layer_norm", {ours + "cross_attn_norm"}});
    }
    // The feed-forward's weights: finish / export_tensors (wi, or wi_0 and wi_1, by feed_forward_proj).
    rows.push_back({scope, hf + (scope == S::EncoderLayer ? "1" : "2") + ".layer_norm", {ours + "ffn_norm"}});
    rows.push_back({S::Model, stack + ".final_layer_norm", {stack + ".final_norm"}});
  }
  rows.push_back({S::Model, "lm_head", {"lm_head"}, HfStorage::Linear, HfPresence::Untied, /*prefixed=*/false});
  return rows;
}

// feed_forward_proj: "relu", "gelu" ... or "gated-gelu", "gated-silu" ... (HF maps gated-gelu to gelu_new).
void read_feed_forward(const JsonFields& c, M& cfg) {
  const std::string proj = c.opt_str("feed_forward_proj", "relu");
  const bool gated = proj.rfind("gated-", 0) == 0;
  std::string act = gated ? proj.substr(6) : proj;
  if (gated && act == "gelu") act = "gelu_new";
  if (act.empty() || act.find('-') != std::string::npos)
    c.fail("feed_forward_proj", "is \"" + proj + "\": expected ACT or gated-ACT (relu, gated-gelu ...)");
  try {
    cfg.activation = hf_detail::parse_hf_activation(act, c.source());
  } catch (const std::runtime_error& e) {
    std::string why = e.what();  // "<config>: activation ... is not supported (...)": the file is named once
    if (why.rfind(c.source() + ": ", 0) == 0) why = why.substr(c.source().size() + 2);
    c.fail("feed_forward_proj", "\"" + proj + "\": " + why);
  }
  cfg.gated_ffn = gated;
}

nlohmann::json write_feed_forward(const M& cfg) {
  const std::string act = cfg.activation == Activation::GeluTanh && cfg.gated_ffn ? "gelu" : hf_detail::hf_activation(cfg.activation);
  return (cfg.gated_ffn ? "gated-" : "") + act;
}

void configure(const JsonFields& c, HfTensors&, M& cfg) {
  cfg.arch = Arch::EncoderDecoder;
  cfg.positional = Positional::Relative;
  cfg.norm = NormPosition::Pre;
  cfg.norm_kind = NormKind::RmsNorm;
  cfg.embed_layer_norm = false;
  cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = false;
  cfg.scaled_attention = false;
  cfg.share_embeddings = true;
  cfg.n_decoder_layers = c.opt_int("num_decoder_layers", cfg.n_encoder_layers);
  cfg.attention_dropout = cfg.activation_dropout = cfg.dropout;  // T5 drops out with dropout_rate everywhere
  read_feed_forward(c, cfg);
  // A tied output scales the decoder output by d_model^-0.5 first (mesh TensorFlow's rescale).
  cfg.output_scale = cfg.tie_embeddings ? 1.0 / std::sqrt(static_cast<double>(cfg.d_model)) : 1.0;
}

// The shared table (copies under encoder/decoder.embed_tokens are the same parameter), an output tied to
// it not read, and each layer's feed-forward.
void finish(const M& cfg, HfTensors& t, TensorMap& s) {
  const int64_t C = cfg.d_model, V = cfg.vocab_size, F = cfg.d_ff;
  s["encoder.embed_tokens.weight"] = hf_detail::take_shared(t, {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}, {V, C});
  if (cfg.tie_embeddings && t.has("lm_head.weight")) t.take("lm_head.weight", {V, C});
  for (const auto& [stack, L] : {std::pair<std::string, int64_t>{"encoder", cfg.n_encoder_layers}, {"decoder", cfg.n_decoder_layers}})
    for (int64_t l = 0; l < L; ++l) {
      const std::string hf = ffn_at(stack, l), ours = stack + ".layers." + std::to_string(l) + ".ffn.";
      if (cfg.gated_ffn) {
        s[ours + "gate.weight"] = t.take(hf + "wi_0.weight", {F, C});
        s[ours + "fc1.weight"] = t.take(hf + "wi_1.weight", {F, C});
      } else {
        s[ours + "fc1.weight"] = t.take(hf + "wi.weight", {F, C});
      }
      s[ours + "fc2.weight"] = t.take(hf + "wo.weight", {C, F});
    }
}

void check(const M& cfg) {
  auto bad = [](const std::string& w) { throw std::invalid_argument("HF export: T5 " + w); };
  if (cfg.arch != Arch::EncoderDecoder || cfg.positional != Positional::Relative)
    bad("is an encoder-decoder with relative positions (arch encoder_decoder, positional relative)");
  if (cfg.norm != NormPosition::Pre || cfg.norm_kind != NormKind::RmsNorm || cfg.embed_layer_norm)
    bad("has pre-norm layers with RMS norms and none after the embeddings (norm pre, norm_kind rms_norm, "
        "embed_layer_norm false)");
  if (cfg.qkv_bias || cfg.o_bias || cfg.mlp_bias) bad("has no biases (qkv_bias, o_bias, mlp_bias false)");
  if (cfg.scaled_attention) bad("has unscaled attention scores (scaled_attention false)");
  if (cfg.gated_ffn && cfg.activation == Activation::Gelu)
    bad("gated-gelu gates with the tanh GELU (activation gelu_tanh); an erf-GELU gate has no feed_forward_proj");
  const double want = cfg.tie_embeddings ? 1.0 / std::sqrt(static_cast<double>(cfg.d_model)) : 1.0;
  if (std::abs(cfg.output_scale - want) > 1e-12 * want)
    bad("scales the decoder output by d_model^-0.5 exactly when the output is tied (output_scale " +
        std::to_string(cfg.output_scale) + ", tie_embeddings " + (cfg.tie_embeddings ? "true" : "false") + ")");
}

void extras(const M& cfg, const TransformerImpl&, nlohmann::json& c) {
  c["decoder_start_token_id"] = cfg.pad_id;  // headprune decodes from the padding id (a base config's may differ)
  if (!c.contains("eos_token_id")) c["eos_token_id"] = 1;
  c["is_encoder_decoder"] = true;
}

// One shared table (both stacks must still hold the same one) and every layer's feed-forward.
void export_tensors(const M& cfg, const std::function<LazyTensor(const std::string&)>& ours, nlohmann::json&,
                    std::map<std::string, LazyTensor>& out) {
  const LazyTensor enc = ours("encoder.embed_tokens.weight");
  if (!cfg.share_embeddings && !torch::equal(enc.make(), ours("decoder.embed_tokens.weight").make()))
    throw std::invalid_argument("HF export: T5 has one embedding table for both stacks, and this model's encoder and "
                                "decoder tables differ (share_embeddings false)");
  out.emplace("shared.weight", enc);
  for (const auto& [stack, L] : {std::pair<std::string, int64_t>{"encoder", cfg.n_encoder_layers}, {"decoder", cfg.n_decoder_layers}})
    for (int64_t l = 0; l < L; ++l) {
      const std::string hf = ffn_at(stack, l), mine = stack + ".layers." + std::to_string(l) + ".ffn.";
      if (cfg.gated_ffn) {
        out.emplace(hf + "wi_0.weight", ours(mine + "gate.weight"));
        out.emplace(hf + "wi_1.weight", ours(mine + "fc1.weight"));
      } else {
        out.emplace(hf + "wi.weight", ours(mine + "fc1.weight"));
      }
      out.emplace(hf + "wo.weight", ours(mine + "fc2.weight"));
    }
}

std::vector<HfConfigKey> keys() {
  return {hf_key("vocab_size", &M::vocab_size),
          hf_key("d_model", &M::d_model, 512),
          hf_key("d_kv", &M::head_dim, 64),
          hf_key("d_ff", &M::d_ff, 2048),
          hf_key("num_layers", &M::n_encoder_layers, 6),
          {"num_decoder_layers", {}, [](const M& cfg) { return nlohmann::json(cfg.n_decoder_layers); }},
          hf_key("num_heads", &M::n_heads, 8),
          hf_key("relative_attention_num_buckets", &M::relative_buckets, 32),
          hf_key("relative_attention_max_distance", &M::relative_max_distance, 128),
          hf_key("dropout_rate", &M::dropout, 0.1),
          hf_key("layer_norm_epsilon", &M::layer_norm_eps, 1e-6),
          hf_key("tie_word_embeddings", &M::tie_embeddings, true),
          hf_key("pad_token_id", &M::pad_id, 0),
          hf_decoder_start_key(),
          hf_key("n_positions", &M::max_positions, 512),
          {"feed_forward_proj", {}, write_feed_forward}};
}

}  // namespace

const HfFamily& family() {
  static const HfFamily f = [] {
    HfFamily f;
    f.model_type = "t5";
    f.architecture = "T5ForConditionalGeneration";
    f.keys = keys();
    f.config_fields = hf_detail::config_fields_with(
        {"n_encoder_layers", "n_decoder_layers", "positional", "relative_buckets", "relative_max_distance", "norm",
         "norm_kind", "embed_layer_norm", "gated_ffn", "qkv_bias", "o_bias", "mlp_bias", "scaled_attention",
         "share_embeddings", "output_scale"});
    f.tensors = tensor_names();
    f.ignorable = {"EncDecAttention.relative_attention_bias.weight"};  // some files carry an unused one
    f.deferred_init = true;
    f.fits = [](const M& cfg) { return cfg.arch == Arch::EncoderDecoder && cfg.positional == Positional::Relative; };
    f.guess = [](const M&) { return true; };
    f.configure = configure;
    f.finish = finish;
    f.check = check;
    f.extras = extras;
    f.export_tensors = export_tensors;
    return f;
  }();
  return f;
}

}  // namespace hp::hf::t5
