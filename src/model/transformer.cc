// The three Transformer families on one set of modules; see the header.
#include "headprune/model/transformer.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>

#include "headprune/model/precision.h"
#include "headprune/util/runtime.h"

namespace hp {

double masked_score(torch::ScalarType dtype) {
  // -1e9 where the dtype holds it (fp32, bf16, fp64: as always); in fp16 (largest 65504) a quarter of
  // the lowest finite value, so that a causal and a padding mask and a position bias added together
  // stay finite (-inf would turn a row with every key blocked into NaN).
  constexpr double kMaskedScore = -1e9;
  if (!at::isFloatingType(dtype)) throw std::invalid_argument("masked_score: additive masks are floating point");
  const double lowest = AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "masked_score",
                                                        [] { return static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
  return std::max(kMaskedScore, lowest / 4);
}

Batch Batch::map(const std::function<torch::Tensor(const torch::Tensor&)>& f) const {
  auto g = [&](const torch::Tensor& t) { return t.defined() ? f(t) : t; };
  Batch b;
  b.input_ids = g(input_ids);
  b.attention_mask = g(attention_mask);
  b.segment_ids = g(segment_ids);
  b.decoder_input_ids = g(decoder_input_ids);
  b.decoder_attention_mask = g(decoder_attention_mask);
  b.labels = g(labels);
  return b;
}

Batch Batch::to(const torch::Device& device) const {
  return map([&](const torch::Tensor& t) { return t.to(device); });
}

Batch Batch::rows(int64_t from, int64_t n) const {
  return map([&](const torch::Tensor& t) { return t.narrow(0, from, n); });
}

torch::Tensor padding_mask(const torch::Tensor& keep, torch::ScalarType dtype) {
  if (!keep.defined()) return {};
  auto blocked = keep.eq(0).unsqueeze(1).unsqueeze(2);  // [B, 1, 1, S]
  return torch::zeros(blocked.sizes(), torch::TensorOptions().dtype(dtype).device(keep.device()))
      .masked_fill(blocked, masked_score(dtype));
}

torch::Tensor causal_mask(int64_t T, const torch::Device& device, torch::ScalarType dtype, int64_t window, int64_t S) {
  if (S < 0) S = T;
  const auto idx = torch::TensorOptions().dtype(torch::kLong).device(device);
  const auto query = torch::arange(S - T, S, idx).unsqueeze(1), key = torch::arange(0, S, idx).unsqueeze(0);
  auto blocked = key > query;
  if (window > 0) blocked = blocked.logical_or(key <= query - window);
  return torch::zeros({T, S}, torch::TensorOptions().dtype(dtype).device(device))
      .masked_fill(blocked, masked_score(dtype))
      .view({1, 1, T, S});
}

// ---------------------------------------------------------------------------------------
TransformerLayerImpl::TransformerLayerImpl(const ModelConfig& cfg, AttnType self_type, int64_t layer, bool with_cross)
    : pre_norm_(cfg.norm == NormPosition::Pre), dropout_(cfg.dropout) {
  self_attn = register_module(
      "self_attn", MultiHeadAttention(head_geometry(cfg, self_type, layer), cfg.attention_dropout));
  self_attn_norm = register_module("self_attn_norm", Norm(cfg.d_model, cfg.layer_norm_eps, cfg.norm_kind));
  if (with_cross) {
    cross_attn = register_module(
        "cross_attn", MultiHeadAttention(head_geometry(cfg, AttnType::Cross, layer), cfg.attention_dropout));
    cross_attn_norm = register_module("cross_attn_norm", Norm(cfg.d_model, cfg.layer_norm_eps, cfg.norm_kind));
  }
  ffn = register_module("ffn", FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.ffn_dropout(), cfg.gated_ffn, cfg.mlp_bias));
  ffn_norm = register_module("ffn_norm", Norm(cfg.d_model, cfg.layer_norm_eps, cfg.norm_kind));
}

torch::Tensor TransformerLayerImpl::forward(torch::Tensor x, const torch::Tensor& self_mask,
                                            const torch::Tensor& memory, const torch::Tensor& cross_mask,
                                            torch::Tensor* self_probs, torch::Tensor* cross_probs,
                                            KVCache* self_cache, KVCache* cross_cache, const Rope* rope) {
  const bool train = is_training();
  // Residual sub-layer: pre-LN x + f(norm(x)), post-LN norm(x + f(x)).
  auto sublayer = [&](const torch::Tensor& in, Norm& norm, auto&& f) {
    if (pre_norm_) return lrp::add(in, torch::dropout(f(norm(in)), dropout_, train));
    return norm(lrp::add(in, torch::dropout(f(in), dropout_, train)));
  };
  // x is still the sub-layer's input inside f (the assignment follows the call).
  x = sublayer(x, self_attn_norm, [&](const torch::Tensor& h) {
    auto out = self_attn->forward(h, h, self_mask, self_probs, self_cache, false, rope);
    if (self_attn->on_output) self_attn->on_output(x, out);
    return out;
  });
  if (cross_attn) {
    x = sublayer(x, cross_attn_norm, [&](const torch::Tensor& h) {
      auto out = cross_attn->forward(h, memory, cross_mask, cross_probs, cross_cache, true);
      if (cross_attn->on_output) cross_attn->on_output(x, out);
      return out;
    });
  }
  return sublayer(x, ffn_norm, [&](const torch::Tensor& h) { return ffn->forward(h); });
}

// ---------------------------------------------------------------------------------------
StackImpl::StackImpl(const ModelConfig& cfg, AttnType self_type, int64_t vocab, bool with_segments,
                     torch::nn::Embedding shared_tokens)
    : dropout_(cfg.dropout), max_positions_(cfg.max_positions) {
  embed_tokens = shared_tokens ? shared_tokens : register_module("embed_tokens", new_embedding(vocab, cfg.d_model));
  if (cfg.positional == Positional::Learned) {
    embed_positions = register_module("embed_positions", new_embedding(cfg.max_positions, cfg.d_model));
  } else if (cfg.positional == Positional::Rotary) {
    inv_freq_ = rope_inv_freq(cfg);  // positions enter inside attention
  } else if (cfg.positional == Positional::Relative) {
    // One table per stack (T5 keeps it in block 0 and every layer reads it), by original head id.
    relative_attention_bias = register_module("relative_attention_bias", new_embedding(cfg.relative_buckets, cfg.n_heads));
    relative_.bidirectional = self_type == AttnType::EncoderSelf;
    relative_.buckets = cfg.relative_buckets;
    relative_.max_distance = cfg.relative_max_distance;
  } else {
    // Wavelengths 2*pi .. 10000*2*pi (Vaswani et al.): sin on even channels and cos on odd ones, or
    // (split_sinusoid, Marian) sin on the first half and cos on the second; pos / 10000^(i/C) in double.
    auto pos = torch::arange(cfg.max_positions, torch::kDouble).unsqueeze(1);
    auto i = torch::arange(0, cfg.d_model, 2, torch::kDouble);
    auto angle = pos / torch::pow(10000.0, i / static_cast<double>(cfg.d_model));
    const auto sines = torch::sin(angle), cosines = torch::cos(angle).slice(1, 0, cfg.d_model / 2);
    if (cfg.split_sinusoid) {
      sinusoid_ = torch::cat({sines, cosines}, 1);
    } else {
      sinusoid_ = torch::zeros({cfg.max_positions, cfg.d_model}, torch::kDouble);
      sinusoid_.slice(1, 0, cfg.d_model, 2).copy_(sines);
      sinusoid_.slice(1, 1, cfg.d_model, 2).copy_(cosines);
    }
    sinusoid_ = sinusoid_.to(torch::kFloat);
    embed_scale_ = std::sqrt(static_cast<double>(cfg.d_model));
  }
  if (with_segments && cfg.n_segments > 0) {
    embed_segments = register_module("embed_segments", new_embedding(cfg.n_segments, cfg.d_model));
  }
  if (cfg.embed_layer_norm) embed_norm = register_module("embed_norm", Norm(cfg.d_model, cfg.layer_norm_eps, cfg.norm_kind));
  layers = register_module("layers", torch::nn::ModuleList());
  const int64_t L = cfg.n_layers(self_type);
  const bool cross = self_type == AttnType::DecoderSelf && cfg.has(AttnType::Cross);
  for (int64_t l = 0; l < L; ++l)
    layers->push_back(TransformerLayer(cfg, self_type, l, cross));
  if (cfg.norm == NormPosition::Pre)
    final_norm = register_module("final_norm", Norm(cfg.d_model, cfg.layer_norm_eps, cfg.norm_kind));
}

StackImpl::Embedded StackImpl::embed(const torch::Tensor& ids, const torch::Tensor& segment_ids,
                                     int64_t position_offset, const torch::Tensor& position_ids) {
  const int64_t T = ids.size(1);
  const int64_t max_pos = embed_positions    ? embed_positions->weight.size(0)
                          : sinusoid_.defined() ? sinusoid_.size(0)
                                                : max_positions_;
  if (!position_ids.defined() && position_offset + T > max_pos)
    throw std::invalid_argument("sequence of length " + std::to_string(position_offset + T) +
                                " exceeds max_positions " + std::to_string(max_pos));
  check_computable(embed_tokens->weight);  // fp16 on the CPU: the rule's error, not a missing kernel's
  Embedded e;
  auto& x = e.x;
  x = embed_tokens(ids);
  if (embed_scale_ != 1.0) x = lrp::elementwise(x * embed_scale_, x);
  // Given positions are the caller's to keep within max_pos: reading them would synchronise.
  const auto positions =
      position_ids.defined() ? position_ids : torch::arange(position_offset, position_offset + T, ids.options());
  if (embed_positions) {
    x = lrp::add(x, embed_positions(positions).unsqueeze(0));
  } else if (inv_freq_.defined()) {
    if (inv_freq_.device() != x.device()) inv_freq_ = inv_freq_.to(x.device());
    e.rope = rope_tables(inv_freq_, positions, x.scalar_type());
  } else if (sinusoid_.defined()) {
    if (sinusoid_.device() != x.device() || sinusoid_.scalar_type() != x.scalar_type())
      sinusoid_ = sinusoid_.to(x.device(), x.scalar_type());
    x = lrp::add(x, sinusoid_.index_select(0, positions).unsqueeze(0));
  }
  if (embed_segments) {
    x = lrp::add(x, embed_segments(segment_ids.defined() ? segment_ids : torch::zeros_like(ids)));
  }
  if (embed_norm) x = embed_norm(x);
  x = torch::dropout(x, dropout_, is_training());
  return e;
}

torch::Tensor StackImpl::finish(const torch::Tensor& x) { return final_norm ? final_norm(x) : x; }

torch::Tensor relative_position_buckets(const torch::Tensor& distance, bool bidirectional, int64_t buckets,
                                        int64_t max_distance) {
  auto n = buckets;
  auto out = torch::zeros_like(distance);
  auto d = distance;
  if (bidirectional) {
    n /= 2;
    out = out + d.gt(0).to(torch::kLong) * n;  // keys after the query: the upper half
    d = d.abs();
  } else {
    d = -torch::clamp_max(d, 0);  // only keys at or before the query
  }
  const int64_t exact = n / 2;
  // Beyond the exact range: logarithmic up to max_distance, in float32 as T5 computes it.
  auto large = torch::log(d.clamp_min(1).to(torch::kFloat) / static_cast<double>(exact)) /
               std::log(static_cast<double>(max_distance) / static_cast<double>(exact)) * static_cast<double>(n - exact);
  auto far = torch::clamp_max(large.to(torch::kLong) + exact, n - 1);
  return out + torch::where(d.lt(exact), d, far);
}

torch::Tensor StackImpl::position_bias(int64_t q_offset, int64_t T, int64_t S) {
  const auto w = relative_attention_bias->weight;
  const auto idx = torch::TensorOptions().dtype(torch::kLong).device(w.device());
  const auto distance = torch::arange(0, S, idx).unsqueeze(0) - torch::arange(q_offset, q_offset + T, idx).unsqueeze(1);
  const auto b = relative_position_buckets(distance, relative_.bidirectional, relative_.buckets, relative_.max_distance);
  return relative_attention_bias(b).permute({2, 0, 1}).unsqueeze(0);  // [T, S, H] -> [1, H, T, S]
}

torch::Tensor with_position_bias(const torch::Tensor& mask, const torch::Tensor& bias, const std::vector<int64_t>& heads) {
  const auto ids = torch::tensor(heads, torch::TensorOptions().dtype(torch::kLong)).to(bias.device());
  auto b = bias.index_select(1, ids);  // this layer's kept heads, by original id
  if (mask.defined()) b = b + mask.to(b.scalar_type());
  return b;
}

torch::Tensor StackImpl::forward(const torch::Tensor& ids, const torch::Tensor& segment_ids,
                                 const torch::Tensor& self_mask, const torch::Tensor& memory,
                                 const torch::Tensor& cross_mask, std::vector<torch::Tensor>* self_probs,
                                 std::vector<torch::Tensor>* cross_probs, int64_t position_offset,
                                 std::vector<KVCache>* self_caches, std::vector<KVCache>* cross_caches,
                                 const torch::Tensor& position_ids) {
  if (position_ids.defined() && relative_attention_bias)
    throw std::invalid_argument("positions held on the device (a replayed decoding step) are not supported with "
                                "relative position biases");
  auto [x, rope] = embed(ids, segment_ids, position_offset, position_ids);
  const int64_t L = n_layers();
  // Relative positions: the bias of every original head for these queries over all keys so far.
  const int64_t T = ids.size(1);
  const auto bias = relative_attention_bias ? position_bias(position_offset, T, position_offset + T) : torch::Tensor();
  if (self_probs) self_probs->assign(L, {});
  if (cross_probs) cross_probs->assign(L, {});
  if (self_caches && self_caches->empty()) self_caches->resize(L);
  if (cross_caches && cross_caches->empty()) cross_caches->resize(L);
  for (int64_t l = 0; l < L; ++l) {
    const auto mask = bias.defined() ? with_position_bias(self_mask, bias, layer(l).self_attn->kept_heads()) : self_mask;
    x = layer(l).forward(x, mask, memory, cross_mask, self_probs ? &(*self_probs)[l] : nullptr,
                         cross_probs ? &(*cross_probs)[l] : nullptr,
                         self_caches ? &(*self_caches)[l] : nullptr,
                         cross_caches ? &(*cross_caches)[l] : nullptr, rope ? &*rope : nullptr);
  }
  return finish(x);
}

torch::Tensor causal_mask_at(const torch::Tensor& position, int64_t S, torch::ScalarType dtype, int64_t window) {
  const auto key = torch::arange(0, S, position.options()).view({1, 1, 1, S});
  auto blocked = key > position;
  if (window > 0) blocked = blocked.logical_or(key <= position - window);
  return torch::zeros({1, 1, 1, S}, position.options().dtype(dtype)).masked_fill(blocked, masked_score(dtype));
}

// ---------------------------------------------------------------------------------------
TransformerImpl::TransformerImpl(ModelConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.finalize();
  const double bytes = cfg_.approx_parameters() * 4.0, memory = static_cast<double>(physical_memory_bytes());
  if (memory > 0 && bytes > memory && !DeferredInit::active()) {  // deferred: the loader checks what it maps
    char buf[160];
    std::snprintf(buf, sizeof buf, "config: the model needs about %.1f GiB for its parameters, more than this machine's %.1f GiB",
                  bytes / (1ull << 30), memory / (1ull << 30));
    throw std::invalid_argument(buf);
  }
  switch (cfg_.arch) {
    case Arch::EncoderClassifier:
      encoder = register_module("encoder", Stack(cfg_, AttnType::EncoderSelf, cfg_.vocab_size, true));
      pooler = register_module("pooler", Dense(cfg_.d_model, cfg_.d_model));
      classifier = register_module("classifier", Dense(cfg_.d_model, cfg_.n_classes));
      break;
    case Arch::DecoderLM:
      decoder = register_module("decoder", Stack(cfg_, AttnType::DecoderSelf, cfg_.vocab_size, false));
      break;
    case Arch::EncoderDecoder:
      encoder = register_module("encoder", Stack(cfg_, AttnType::EncoderSelf, cfg_.vocab_size, false));
      decoder = register_module("decoder", Stack(cfg_, AttnType::DecoderSelf, cfg_.effective_tgt_vocab(), false,
                                                 cfg_.share_embeddings ? encoder->embed_tokens : nullptr));
      break;
  }
  if (decoder && !cfg_.tie_embeddings)
    lm_head = register_module("lm_head", Dense(cfg_.d_model, decoder->embed_tokens->weight.size(0), false));
  if (decoder && cfg_.logits_bias)
    logits_bias_ = register_buffer("final_logits_bias", torch::zeros({decoder->embed_tokens->weight.size(0)}));
}

namespace {
// A causal mask plus a batch's padding, when it has a keep mask. A batch without one has no padding:
// every token is real (HF's convention), whatever its id; an end-of-text id inside packed text is a token
// like any other. Padding is known only from how a batch was built (collate's lengths).
torch::Tensor with_padding(const torch::Tensor& causal, const torch::Tensor& keep, torch::ScalarType dtype) {
  const auto padding = padding_mask(keep, dtype);
  return padding.defined() ? causal + padding : causal;
}
void check_ids(const torch::Tensor& ids, const char* field) {
  if (!ids.defined()) throw std::invalid_argument(std::string("batch: ") + field + " is required");
  if (ids.dim() != 2)
    throw std::invalid_argument(std::string("batch: ") + field + " must be [batch, length], got " +
                                std::to_string(ids.dim()) + " dims");
}
}  // namespace

torch::Tensor TransformerImpl::encode(const Batch& batch, std::map<AttnType, std::vector<torch::Tensor>>* attn) {
  check_ids(batch.input_ids, "input_ids");
  const auto dtype = encoder->embed_tokens->weight.scalar_type();
  auto mask = padding_mask(batch.attention_mask, dtype);
  return encoder->forward(batch.input_ids, batch.segment_ids, mask, {}, {},
                          attn ? &(*attn)[AttnType::EncoderSelf] : nullptr, nullptr);
}

torch::Tensor TransformerImpl::classify(const torch::Tensor& h) {
  auto first = pooler(h.select(1, 0));  // first token ([CLS])
  auto pooled = lrp::elementwise(torch::tanh(first), first);
  pooled = torch::dropout(pooled, cfg_.dropout, is_training());
  return classifier(pooled);
}

torch::Tensor TransformerImpl::decoder_lm_mask(const Batch& batch) const {
  check_ids(batch.input_ids, "input_ids");
  const auto dtype = decoder->embed_tokens->weight.scalar_type();
  const int64_t T = batch.input_ids.size(1);
  return with_padding(causal_mask(T, batch.input_ids.device(), dtype, cfg_.sliding_window), batch.attention_mask,
                      dtype);
}

Stack& TransformerImpl::single_stack() {
  if (cfg_.arch == Arch::EncoderDecoder)
    throw std::invalid_argument("layer-by-layer execution covers single-stack models (decoder_lm, "
                                "encoder_classifier), not an encoder-decoder");
  return cfg_.arch == Arch::DecoderLM ? decoder : encoder;
}

TransformerImpl::StackState TransformerImpl::stack_begin(const Batch& batch) {
  Stack& s = single_stack();
  StackState st;
  if (cfg_.arch == Arch::DecoderLM) {
    st.mask = decoder_lm_mask(batch);
  } else {
    check_ids(batch.input_ids, "input_ids");
    st.mask = padding_mask(batch.attention_mask, encoder->embed_tokens->weight.scalar_type());
  }
  auto e = s->embed(batch.input_ids, cfg_.arch == Arch::DecoderLM ? torch::Tensor() : batch.segment_ids);
  st.x = e.x;
  st.rope = e.rope;
  return st;
}

torch::Tensor TransformerImpl::stack_layer(int64_t l, const torch::Tensor& x, const StackState& st) {
  return single_stack()->layer(l).forward(x, st.mask, {}, {}, nullptr, nullptr, nullptr, nullptr,
                                          st.rope ? &*st.rope : nullptr);
}

torch::Tensor TransformerImpl::stack_end(const torch::Tensor& x) {
  auto h = single_stack()->finish(x);
  return cfg_.arch == Arch::DecoderLM ? output_projection(h) : classify(h);
}

torch::Tensor TransformerImpl::output_projection(const torch::Tensor& hidden_in) const {
  const auto hidden = cfg_.output_scale == 1.0 ? hidden_in : lrp::elementwise(hidden_in * cfg_.output_scale, hidden_in);
  auto logits = lm_head ? lm_head->forward(hidden) : lrp::linear(hidden, decoder->embed_tokens->weight, {});
  if (!logits_bias_.defined()) return logits;
  return lrp::elementwise(logits + logits_bias_.to(logits.scalar_type()), logits);  // a constant: relevance passes
}

ModelOutput TransformerImpl::forward(const Batch& batch, const ForwardOptions& opts) {
  ModelOutput out;
  auto* attn = opts.return_attention ? &out.attention : nullptr;
  switch (cfg_.arch) {
    case Arch::EncoderClassifier:
      out.logits = classify(encode(batch, attn));  // [B, T, C] -> [B, n_classes]
      break;
    case Arch::DecoderLM: {
      auto h = decoder->forward(batch.input_ids, {}, decoder_lm_mask(batch), {}, {},
                                attn ? &(*attn)[AttnType::DecoderSelf] : nullptr, nullptr);
      out.logits = output_projection(h);  // [B, T, V]
      break;
    }
    case Arch::EncoderDecoder: {
      auto memory = encode(batch, attn);                                // [B, T, C]
      check_ids(batch.decoder_input_ids, "decoder_input_ids");
      const auto dtype = decoder->embed_tokens->weight.scalar_type();
      const int64_t U = batch.decoder_input_ids.size(1);
      auto self_mask = with_padding(causal_mask(U, batch.decoder_input_ids.device(), dtype, cfg_.sliding_window),
                                    batch.decoder_attention_mask, dtype);
      auto cross_mask = padding_mask(batch.attention_mask, dtype);
      auto h = decoder->forward(batch.decoder_input_ids, {}, self_mask, memory, cross_mask,
                                attn ? &(*attn)[AttnType::DecoderSelf] : nullptr,
                                attn ? &(*attn)[AttnType::Cross] : nullptr);
      out.logits = output_projection(h);                                // [B, U, V]
      break;
    }
  }
  return out;
}

torch::Tensor TransformerImpl::loss(const ModelOutput& out, const Batch& batch, double label_smoothing) const {
  if (!batch.labels.defined()) throw std::invalid_argument("batch: labels are required for the loss");
  namespace F = torch::nn::functional;
  auto opts = F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex).label_smoothing(label_smoothing);
  // Reduced-precision logits are upcast; float32 and float64 stay as they are.
  const auto logits = out.logits.scalar_type() == torch::kDouble ? out.logits : out.logits.to(torch::kFloat);
  if (cfg_.arch == Arch::EncoderClassifier) return F::cross_entropy(logits, batch.labels, opts);
  return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.labels.reshape({-1}), opts);
}

// ---------------------------------------------------------------------------------------
MultiHeadAttentionImpl& TransformerImpl::attention(AttnType type, int64_t layer) {
  if (!cfg_.has(type))
    throw std::invalid_argument("model " + to_string(cfg_.arch) + " has no " + to_string(type) + " attention");
  const int64_t L = cfg_.n_layers(type);
  if (layer < 0 || layer >= L)
    throw std::invalid_argument(to_string(type) + " layer " + std::to_string(layer) + " does not exist (model has " +
                                std::to_string(L) + " layers)");
  auto& stack = type == AttnType::EncoderSelf ? encoder : decoder;
  auto& lay = stack->layer(layer);
  return type == AttnType::Cross ? *lay.cross_attn : *lay.self_attn;
}

std::vector<HeadMaskView> TransformerImpl::head_masks() {
  std::vector<HeadMaskView> out;
  for (AttnType t : cfg_.attn_types())
    for (int64_t l = 0; l < cfg_.n_layers(t); ++l) {
      auto& a = attention(t, l);
      out.push_back({t, l, a.kept_heads(), a.head_mask});
    }
  return out;
}

void TransformerImpl::set_head_mask(const HeadId& head, double value) {
  auto& a = attention(head.type, head.layer);
  const int64_t pos = a.position_of(head.head);
  if (pos < 0) {
    std::string kept;
    for (int64_t h : a.kept_heads()) kept += (kept.empty() ? "" : ", ") + std::to_string(h);
    throw std::invalid_argument("head " + to_string(head) + " is not in the model (" + to_string(head.type) +
                                " layer " + std::to_string(head.layer) + " keeps heads [" + kept + "])");
  }
  torch::NoGradGuard no_grad;
  a.head_mask.index_put_({pos}, value);
}

void TransformerImpl::unmask_all() {
  torch::NoGradGuard no_grad;
  for (auto& m : head_masks()) m.mask.fill_(1.0);
}

void TransformerImpl::set_head_masks_requires_grad(bool on) {
  for (auto& m : head_masks()) {
    m.mask.set_requires_grad(on);
    if (!on && m.mask.grad().defined()) m.mask.mutable_grad() = torch::Tensor();
  }
}

std::vector<HeadId> TransformerImpl::masked_heads() {
  std::vector<HeadId> out;
  for (auto& m : head_masks()) {
    auto v = m.mask.detach().to(torch::kCPU, torch::kDouble).contiguous();  // one read per layer
    for (size_t i = 0; i < m.heads.size(); ++i)
      if (v.data_ptr<double>()[i] == 0.0) out.push_back({m.type, m.layer, m.heads[i]});
  }
  return out;
}

int64_t TransformerImpl::n_active_heads() {
  int64_t n = 0;
  for (auto t : cfg_.attn_types()) n += cfg_.n_heads_kept(t);
  return n - static_cast<int64_t>(masked_heads().size());
}

int64_t TransformerImpl::n_parameters() {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void randomize_parameters(TransformerImpl& model, uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& p : model.named_parameters()) {
    auto r = torch::randn(p.value().sizes(), gen, torch::TensorOptions().dtype(torch::kDouble));
    // LayerNorm weights stay near 1 so activations keep a sane scale.
    if (p.key().find("norm.weight") != std::string::npos) r = 1.0 + 0.1 * r;
    else r = std * r;
    p.value().copy_(r);
  }
}

}  // namespace hp
