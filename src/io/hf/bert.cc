// BERT (BertModel, BertForSequenceClassification): post-LayerNorm encoder with learned positions,
// segment embeddings and a LayerNorm after the embeddings; a pooler and a classifier on top.
#include "family.h"
#include "tensors.h"

namespace hp::hf::bert {

namespace {

using hf_detail::fail;

// The classes: the classifier's rows, else id2label's size, else num_labels.
int64_t classes(const JsonFields& c, const hf_detail::HfTensors& t) {
  if (t.has("classifier.weight")) return t.rows("classifier.weight");
  const auto& j = c.json();
  if (j.contains("id2label") && j.at("id2label").is_object() && !j.at("id2label").empty() &&
      j.at("id2label").size() <= static_cast<size_t>(ConfigLimits::classes))
    return static_cast<int64_t>(j.at("id2label").size());
  return c.opt_int("num_labels", 2);
}

void configure(const JsonFields& c, hf_detail::HfTensors& t, ModelConfig& cfg) {
  cfg.arch = Arch::EncoderClassifier;
  cfg.activation_dropout = 0.0;  // BertIntermediate's activation goes to BertOutput's dense undropped
  if (cfg.n_heads <= 0 || cfg.d_model % cfg.n_heads != 0)
    fail(c.source(), "hidden_size must be a multiple of num_attention_heads");
  cfg.positional = Positional::Learned;
  cfg.norm = NormPosition::Post;
  cfg.embed_layer_norm = true;
  cfg.tie_embeddings = false;
  cfg.encoder_self_heads = hf_detail::kept_from_pruned(c.json(), cfg.n_encoder_layers, cfg.n_heads, c.source());
  cfg.n_classes = classes(c, t);
}

void check(const ModelConfig& cfg) {
  hf_detail::check_classic_block(cfg, "BERT");
  if (cfg.norm != NormPosition::Post || !cfg.embed_layer_norm || cfg.n_segments < 1)
    throw std::invalid_argument("HF export: a BERT needs post-LayerNorm (norm post), a LayerNorm after the embeddings "
                                "(embed_layer_norm) and segment embeddings (n_segments >= 1)");
}

// id2label / label2id for the model's classes, unless the base config's fit.
void extras(const ModelConfig& cfg, const TransformerImpl&, nlohmann::json& c) {
  if (c.contains("id2label") && c.at("id2label").size() == static_cast<size_t>(cfg.n_classes)) return;
  c["id2label"] = nlohmann::json::object();
  c["label2id"] = nlohmann::json::object();
  for (int64_t k = 0; k < cfg.n_classes; ++k) {
    c["id2label"][std::to_string(k)] = "LABEL_" + std::to_string(k);
    c["label2id"]["LABEL_" + std::to_string(k)] = k;
  }
}

std::vector<HfTensorName> tensor_names() {
  using S = HfScope;
  return {{S::Model, "embeddings.word_embeddings", {"encoder.embed_tokens"}},
          {S::Model, "embeddings.position_embeddings", {"encoder.embed_positions"}},
          {S::Model, "embeddings.token_type_embeddings", {"encoder.embed_segments"}},
          {S::Model, "embeddings.LayerNorm", {"encoder.embed_norm"}},
          {S::EncoderLayer, "encoder.layer.{L}.attention.self.query", {"encoder.layers.{L}.self_attn.q_proj"}},
          {S::EncoderLayer, "encoder.layer.{L}.attention.self.key", {"encoder.layers.{L}.self_attn.k_proj"}},
          {S::EncoderLayer, "encoder.layer.{L}.attention.self.value", {"encoder.layers.{L}.self_attn.v_proj"}},
          {S::EncoderLayer, "encoder.layer.{L}.attention.output.dense", {"encoder.layers.{L}.self_attn.o_proj"}},
          {S::EncoderLayer, "encoder.layer.{L}.attention.output.LayerNorm", {"encoder.layers.{L}.self_attn_norm"}},
          {S::EncoderLayer, "encoder.layer.{L}.intermediate.dense", {"encoder.layers.{L}.ffn.fc1"}},
          {S::EncoderLayer, "encoder.layer.{L}.output.dense", {"encoder.layers.{L}.ffn.fc2"}},
          {S::EncoderLayer, "encoder.layer.{L}.output.LayerNorm", {"encoder.layers.{L}.ffn_norm"}},
          {S::Model, "pooler.dense", {"pooler"}, HfStorage::Linear, HfPresence::Optional},
          {S::Model, "classifier", {"classifier"}, HfStorage::Linear, HfPresence::Optional, /*prefixed=*/false}};
}

}  // namespace

const HfFamily& family() {
  static const HfFamily f = [] {
    HfFamily f;
    f.model_type = "bert";
    f.architecture = "BertForSequenceClassification";
    f.prefix = "bert.";
    f.keys = {hf_key("vocab_size", &ModelConfig::vocab_size),
              hf_key("hidden_size", &ModelConfig::d_model),
              hf_key("num_attention_heads", &ModelConfig::n_heads),
              hf_key("num_hidden_layers", &ModelConfig::n_encoder_layers),
              hf_key("intermediate_size", &ModelConfig::d_ff),
              hf_key("max_position_embeddings", &ModelConfig::max_positions),
              hf_key("type_vocab_size", &ModelConfig::n_segments, 2),
              hf_key("layer_norm_eps", &ModelConfig::layer_norm_eps, 1e-12),
              hf_key("hidden_dropout_prob", &ModelConfig::dropout, 0.1),
              hf_key("attention_probs_dropout_prob", &ModelConfig::attention_dropout, 0.1),
              hf_key("pad_token_id", &ModelConfig::pad_id, 0),
              hf_activation_key("hidden_act", "gelu"),
              hf_fixed_key("position_embedding_type", "absolute")};
    // Learned positions, post-LayerNorm, biases everywhere: the defaults, so not listed.
    f.config_fields = hf_detail::config_fields_with({"n_encoder_layers", "n_segments", "n_classes"});
    f.tensors = tensor_names();
    f.ignorable = {"embeddings.position_ids"};
    f.pruned_heads = true;
    f.fits = [](const ModelConfig& cfg) { return cfg.positional != Positional::Rotary && cfg.arch == Arch::EncoderClassifier; };
    f.guess = [](const ModelConfig&) { return true; };
    f.configure = configure;
    f.check = check;
    f.extras = extras;
    return f;
  }();
  return f;
}

}  // namespace hp::hf::bert
