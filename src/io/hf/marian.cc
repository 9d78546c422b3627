// MarianMT (MarianMTModel, the opus-mt translation models): a Transformer-base encoder-decoder with
// post-LayerNorm layers, sinusoidal positions that HF builds rather than stores (sin on the first half
// of the channels, cos on the second: ModelConfig::split_sinusoid), embeddings scaled by sqrt(d_model),
// no LayerNorm after the embeddings and none after either stack, one embedding table shared by the
// encoder, the decoder and the output layer (model.shared), and final_logits_bias added to the logits.
// Decoding starts from the padding id (decoder_start_token_id), as the Marian tokenizer's frame says.
#include "family.h"
#include "tensors.h"

namespace hp::hf::marian {

namespace {

using hf_detail::fail;
using hf_detail::HfTensors;
using M = ModelConfig;

// The rows of one attention block: its q, k, v and out projections.
void attention_rows(std::vector<HfTensorName>& rows, HfScope scope, const std::string& hf, const std::string& ours) {
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) rows.push_back({scope, hf + "." + p, {ours + "." + p}});
  rows.push_back({scope, hf + ".out_proj", {ours + ".o_proj"}});
}

std::vector<HfTensorName> tensor_names() {
  std::vector<HfTensorName> rows;
  for (const auto& [scope, stack] : {std::pair<HfScope, std::string>{HfScope::EncoderLayer, "encoder"},
                                     {HfScope::DecoderLayer, "decoder"}}) {
    const std::string hf = stack + ".layers.{L}.", ours = stack + ".layers.{L}.";
    attention_rows(rows, scope, hf + "self_attn", ours + "self_attn");
    rows.push_back({scope, hf + "self_attn_layer_norm", {ours + "self_attn_norm"}});
    if (scope == HfScope::DecoderLayer) {
      attention_rows(rows, scope, hf + "encoder_attn", ours + "cross_attn");
      rows.push_back({scope, hf + "encoder_attn_layer_norm", {ours + "cross_attn_norm"}});
    }
    rows.push_back({scope, hf + "fc1", {ours + "ffn.fc1"}});
    rows.push_back({scope, hf + "fc2", {ours + "ffn.fc2"}});
    rows.push_back({scope, hf + "final_layer_norm", {ours + "ffn_norm"}});
  }
  rows.push_back({HfScope::Model, "lm_head", {"lm_head"}, HfStorage::Linear, HfPresence::Untied, /*prefixed=*/false});
  return rows;
}

// A decoder-side key that must equal its encoder-side twin (headprune has one head count and one d_ff).
HfConfigKey twin_key(std::string key, int64_t M::*field, int64_t dflt, std::string twin) {
  return {key,
          [key, field, dflt, twin](const JsonFields& c, M& cfg) {
            const int64_t v = c.opt_int(key, dflt);
            if (v != cfg.*field)
              c.fail(key, "is " + std::to_string(v) + " but " + twin + " is " + std::to_string(cfg.*field) +
                              ": headprune needs the same value for the encoder and the decoder");
          },
          [field](const M& cfg) { return nlohmann::json(cfg.*field); }};
}

void configure(const JsonFields& c, HfTensors& t, M& cfg) {
  cfg.arch = Arch::EncoderDecoder;
  cfg.positional = Positional::Sinusoidal;
  cfg.split_sinusoid = true;
  cfg.norm = NormPosition::Post;
  cfg.norm_kind = NormKind::LayerNorm;
  cfg.embed_layer_norm = false;
  cfg.layer_norm_eps = 1e-5;  // torch's nn.LayerNorm default, which MarianEncoderLayer uses
  cfg.logits_bias = true;
  if (!c.opt_bool("scale_embedding", false))
    c.fail("scale_embedding", "is false: headprune scales sinusoidal-position embeddings by sqrt(d_model), as every "
                              "opus-mt model does (scale_embedding: true)");
  // One table for both sides (model.shared), or one each (decoder_vocab_size ids on the target side).
  if (c.opt_bool("share_encoder_decoder_embeddings", true)) {
    cfg.tgt_vocab_size = 0;
    cfg.share_embeddings = true;
  } else {
    cfg.tgt_vocab_size = c.opt_int("decoder_vocab_size", cfg.vocab_size);
    for (const char* n : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"})
      if (!t.has(n))
        fail(t.source(), std::string("missing tensor 'model.") + n +
                             "' (share_encoder_decoder_embeddings is false: each side has its own table)");
  }
}

// The embeddings as HF ties them: model.shared for both sides when the file has it (copies stored beside
// it are the same parameter), else each side's own; an output layer tied to them is not read. Then
// final_logits_bias ([1, V]; absent: zeros, as HF initializes it).
void finish(const M& cfg, HfTensors& t, TensorMap& s) {
  const int64_t C = cfg.d_model, V = cfg.vocab_size, W = cfg.effective_tgt_vocab();
  if (cfg.share_embeddings) {  // one parameter: the decoder reads the encoder's table
    s["encoder.embed_tokens.weight"] =
        hf_detail::take_shared(t, {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}, {V, C});
  } else {
    s["encoder.embed_tokens.weight"] = t.take("encoder.embed_tokens.weight", {V, C});
    s["decoder.embed_tokens.weight"] = t.take("decoder.embed_tokens.weight", {W, C});
  }
  if (cfg.tie_embeddings && t.has("lm_head.weight")) t.take("lm_head.weight", {W, C});
  s["final_logits_bias"] = t.has("final_logits_bias") ? t.take("final_logits_bias", {1, W}).reshape({W})
                                                      : torch::zeros({W}, s.at("final_logits_bias").options());
}

void check(const M& cfg) {
  auto bad = [](const std::string& w) { throw std::invalid_argument("HF export: Marian " + w); };
  if (cfg.arch != Arch::EncoderDecoder || cfg.positional != Positional::Sinusoidal || !cfg.split_sinusoid)
    bad("is an encoder-decoder with sinusoidal positions in sin | cos halves (arch encoder_decoder, positional "
        "sinusoidal, split_sinusoid)");
  if (cfg.embed_layer_norm) bad("has no LayerNorm after the embeddings (embed_layer_norm)");
  if (cfg.layer_norm_eps != 1e-5) bad("has LayerNorms with eps 1e-5 (layer_norm_eps)");
  if (cfg.head_dim * cfg.n_heads != cfg.d_model) bad("has head_dim * n_heads = d_model");
}

// Without a base config, generation as every opus-mt config sets it: decoding starts from the padding
// id, </s> (id 0 in every Marian vocabulary) ends it, and padding is never generated.
void extras(const M& cfg, const TransformerImpl&, nlohmann::json& c) {
  c["decoder_start_token_id"] = cfg.pad_id;  // headprune decodes from the padding id (a base config's may differ)
  if (!c.contains("eos_token_id")) c["eos_token_id"] = 0;
  if (!c.contains("forced_eos_token_id")) c["forced_eos_token_id"] = 0;
  if (!c.contains("bad_words_ids")) c["bad_words_ids"] = {{cfg.pad_id}};
  c["is_encoder_decoder"] = true;
}

// One model.shared when the model has one table (share_embeddings, as imported) or two equal ones, else
// each side's own (share_encoder_decoder_embeddings false); final_logits_bias [1, V].
void export_tensors(const M& cfg, const std::function<LazyTensor(const std::string&)>& ours, nlohmann::json& c,
                    std::map<std::string, LazyTensor>& out) {
  const LazyTensor enc = ours("encoder.embed_tokens.weight");
  const LazyTensor dec = cfg.share_embeddings ? enc : ours("decoder.embed_tokens.weight");
  const bool shared = cfg.share_embeddings || (enc.shape == dec.shape && torch::equal(enc.make(), dec.make()));
  c["share_encoder_decoder_embeddings"] = shared;
  c["decoder_vocab_size"] = cfg.effective_tgt_vocab();
  if (shared) {
    out.emplace("model.shared.weight", enc);
  } else {
    out.emplace("model.encoder.embed_tokens.weight", enc);
    out.emplace("model.decoder.embed_tokens.weight", dec);
  }
  const int64_t W = cfg.effective_tgt_vocab();
  if (cfg.logits_bias) {
    const LazyTensor b = ours("final_logits_bias");
    out.emplace("final_logits_bias", LazyTensor{b.dtype, {1, W}, [b, W] { return b.make().reshape({1, W}); }});
  } else {
    out.emplace("final_logits_bias", LazyTensor{enc.dtype, {1, W}, [dt = enc.dtype, W] { return torch::zeros({1, W}, dt); }});
  }
}

}  // namespace

const HfFamily& family() {
  static const HfFamily f = [] {
    HfFamily f;
    f.model_type = "marian";
    f.architecture = "MarianMTModel";
    f.prefix = "model.";
    f.keys = {hf_key("vocab_size", &M::vocab_size),
              hf_key("d_model", &M::d_model, 1024),
              hf_key("encoder_layers", &M::n_encoder_layers, 12),
              hf_key("decoder_layers", &M::n_decoder_layers, 12),
              hf_key("encoder_attention_heads", &M::n_heads, 16),
              twin_key("decoder_attention_heads", &M::n_heads, 16, "encoder_attention_heads"),
              hf_key("encoder_ffn_dim", &M::d_ff, 4096),
              twin_key("decoder_ffn_dim", &M::d_ff, 4096, "encoder_ffn_dim"),
              hf_key("max_position_embeddings", &M::max_positions, 1024),
              hf_key("dropout", &M::dropout, 0.1),
              hf_key("attention_dropout", &M::attention_dropout, 0.0),
              hf_key("activation_dropout", &M::activation_dropout, 0.0),
              hf_activation_key("activation_function", "gelu"),
              hf_key("pad_token_id", &M::pad_id, 58100),
              hf_decoder_start_key(),
              hf_key("tie_word_embeddings", &M::tie_embeddings, true),
              {"scale_embedding", {}, [](const M&) { return nlohmann::json(true); }}};
    // Post-LayerNorm and biases everywhere: the defaults, so not listed.
    f.config_fields = hf_detail::config_fields_with({"tgt_vocab_size", "n_encoder_layers", "n_decoder_layers", "positional",
                                                     "split_sinusoid", "embed_layer_norm", "logits_bias",
                                                     "share_embeddings"});
    f.tensors = tensor_names();
    f.ignorable = {"embed_positions.weight"};  // older files store the sinusoid HF rebuilds anyway
    f.deferred_init = true;
    f.fits = [](const M& cfg) {
      return cfg.arch == Arch::EncoderDecoder && cfg.positional == Positional::Sinusoidal && cfg.split_sinusoid;
    };
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

}  // namespace hp::hf::marian
