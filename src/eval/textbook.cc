// A plain-LibTorch BERT-style classifier for comparisons (see header).
#include "headprune/eval/textbook.h"

#include <cmath>
#include <stdexcept>

namespace hp {

namespace nn = torch::nn;

TextbookEncoderLayerImpl::TextbookEncoderLayerImpl(const ModelConfig& cfg, const HeadGeometry& geometry)
    : n_heads_(geometry.n_heads_kept()), head_dim_(geometry.head_dim), act_(cfg.activation) {
  const int64_t C = cfg.d_model, HD = geometry.q_width();
  query = register_module("query", nn::Linear(C, HD));
  key = register_module("key", nn::Linear(C, HD));
  value = register_module("value", nn::Linear(C, HD));
  out = register_module("out", nn::Linear(HD, C));
  fc1 = register_module("fc1", nn::Linear(C, cfg.d_ff));
  fc2 = register_module("fc2", nn::Linear(cfg.d_ff, C));
  norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({C}).eps(cfg.layer_norm_eps)));
  norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({C}).eps(cfg.layer_norm_eps)));
  dropout = register_module("dropout", nn::Dropout(cfg.dropout));
}

torch::Tensor TextbookEncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_heads_, head_dim_}).transpose(1, 2); };
  auto q = heads(query(x)), k = heads(key(x)), v = heads(value(x));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_)) + mask;
  auto probs = dropout(torch::softmax(scores, -1));
  auto ctx = torch::matmul(probs, v).transpose(1, 2).contiguous().view({B, T, n_heads_ * head_dim_});
  auto h = norm1(x + dropout(out(ctx)));
  auto f = fc1(h);
  f = act_ == Activation::Relu ? torch::relu(f) : torch::gelu(f, act_ == Activation::GeluTanh ? "tanh" : "none");
  return norm2(h + dropout(fc2(dropout(f))));
}

TextbookClassifierImpl::TextbookClassifierImpl(TransformerImpl& source) {
  const ModelConfig& cfg = source.config();
  auto unsupported = [](const std::string& what) {
    throw std::invalid_argument("textbook baseline: " + what);
  };
  if (cfg.arch != Arch::EncoderClassifier) unsupported("only encoder_classifier models");
  if (cfg.norm != NormPosition::Post) unsupported("only post-LN models");
  if (cfg.positional != Positional::Learned) unsupported("only learned positions");
  if (!cfg.embed_layer_norm) unsupported("only models with an embedding LayerNorm");
  if (!cfg.scaled_attention || cfg.output_scale != 1.0) unsupported("only scores scaled by 1/sqrt(head_dim)");
  if (cfg.norm_kind != NormKind::LayerNorm || cfg.gated_ffn || !cfg.mlp_bias)
    unsupported("only LayerNorm models with a plain feed-forward with biases");
  std::vector<HeadGeometry> geometry;
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l) {
    geometry.push_back(head_geometry(cfg, AttnType::EncoderSelf, l));
    const auto& g = geometry.back();
    if (g.n_heads_kept() != cfg.n_heads) unsupported("only unpruned models (every head kept)");
    if (g.grouped()) unsupported("only one key/value head per query head (no grouped-query attention)");
    if (!g.qkv_bias || !g.o_bias) unsupported("only models with biases on every projection");
  }
  if (!source.masked_heads().empty()) unsupported("only models without masked heads");
  const int64_t C = cfg.d_model;
  tokens = register_module("tokens", nn::Embedding(cfg.vocab_size, C));
  positions = register_module("positions", nn::Embedding(cfg.max_positions, C));
  if (cfg.n_segments > 0) segments = register_module("segments", nn::Embedding(cfg.n_segments, C));
  embed_norm = register_module("embed_norm", nn::LayerNorm(nn::LayerNormOptions({C}).eps(cfg.layer_norm_eps)));
  embed_dropout = register_module("embed_dropout", nn::Dropout(cfg.dropout));
  layers = register_module("layers", nn::ModuleList());
  for (const auto& g : geometry) layers->push_back(TextbookEncoderLayer(cfg, g));
  pooler = register_module("pooler", nn::Linear(C, C));
  classifier = register_module("classifier", nn::Linear(C, cfg.n_classes));

  // Copy the weights: every parameter of this module from its counterpart in `source`.
  torch::NoGradGuard no_grad;
  auto src = source.named_parameters();
  auto copy = [&](const torch::Tensor& dst, const std::string& name) { dst.copy_(src[name]); };
  copy(tokens->weight, "encoder.embed_tokens.weight");
  copy(positions->weight, "encoder.embed_positions.weight");
  if (segments) copy(segments->weight, "encoder.embed_segments.weight");
  copy(embed_norm->weight, "encoder.embed_norm.weight");
  copy(embed_norm->bias, "encoder.embed_norm.bias");
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l) {
    auto& lay = *layers->ptr<TextbookEncoderLayerImpl>(l);
    const std::string p = "encoder.layers." + std::to_string(l) + ".";
    const std::pair<nn::Linear*, const char*> linears[] = {{&lay.query, "self_attn.q_proj"}, {&lay.key, "self_attn.k_proj"},
                                                           {&lay.value, "self_attn.v_proj"}, {&lay.out, "self_attn.o_proj"},
                                                           {&lay.fc1, "ffn.fc1"},            {&lay.fc2, "ffn.fc2"}};
    for (const auto& [lin, name] : linears) {
      copy((*lin)->weight, p + name + ".weight");
      copy((*lin)->bias, p + name + ".bias");
    }
    copy(lay.norm1->weight, p + "self_attn_norm.weight");
    copy(lay.norm1->bias, p + "self_attn_norm.bias");
    copy(lay.norm2->weight, p + "ffn_norm.weight");
    copy(lay.norm2->bias, p + "ffn_norm.bias");
  }
  for (const auto& [lin, name] : {std::pair<nn::Linear*, const char*>{&pooler, "pooler"}, {&classifier, "classifier"}}) {
    copy((*lin)->weight, std::string(name) + ".weight");
    copy((*lin)->bias, std::string(name) + ".bias");
  }
}

torch::Tensor TextbookClassifierImpl::forward(const Batch& batch) {
  const auto& ids = batch.input_ids;
  const int64_t T = ids.size(1);
  auto x = tokens(ids) + positions(torch::arange(T, ids.options())).unsqueeze(0);
  if (segments) x = x + segments(batch.segment_ids.defined() ? batch.segment_ids : torch::zeros_like(ids));
  x = embed_dropout(embed_norm(x));
  auto mask = torch::zeros({ids.size(0), 1, 1, T}, x.options());  // no mask given: every token is real
  if (batch.attention_mask.defined()) mask.masked_fill_(batch.attention_mask.eq(0).view({ids.size(0), 1, 1, T}),
                                                   masked_score(x.scalar_type()));
  for (const auto& m : *layers) x = m->as<TextbookEncoderLayerImpl>()->forward(x, mask);
  return classifier(torch::tanh(pooler(x.select(1, 0))));
}

}  // namespace hp
