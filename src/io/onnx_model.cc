// A single-stack model as an ONNX graph (see header).
#include "headprune/io/onnx_model.h"

#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>

#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/rotary.h"
#include "headprune/model/state.h"

namespace hp {

namespace {

using A = OnnxAttr;
constexpr float kMasked = -1e9f;  // as the model's additive masks

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("ONNX export: " + what);
}

class Builder {
 public:
  Builder(OnnxExport& out, const ModelConfig& cfg, std::shared_ptr<const TensorMap> state, OnnxAttention attention,
          bool kv_cache)
      : out_(out), g_(out.graph), c_(cfg), s_(std::move(state)), attention_(attention), kv_(kv_cache) {}

  void build() {
    const bool encoder = c_.arch == Arch::EncoderClassifier;
    // optimum's dimension names with a cache (transformers.js sizes an empty cache from them: batch_size
    // is the batch, any other name 0), the shorter ones without.
    const std::string stack = encoder ? "encoder" : "decoder", T = kv_ ? "sequence_length" : "sequence",
                      B = kv_ ? "batch_size" : "batch";
    g_.input("input_ids", OnnxType::Int64, {B, T});
    g_.input("attention_mask", OnnxType::Int64, {B, kv_ ? "total_sequence_length" : T});
    if (kv_) g_.input("position_ids", OnnxType::Int64, {B, T});
    if (encoder && c_.n_segments > 0) g_.input("token_type_ids", OnnxType::Int64, {B, T});
    std::string x = embed(stack, encoder);
    const auto masks = make_masks(encoder);
    const AttnType type = encoder ? AttnType::EncoderSelf : AttnType::DecoderSelf;
    for (int64_t l = 0; l < c_.n_layers(type); ++l) x = layer(x, type, l, masks);
    if (has(stack + ".final_norm.weight")) x = norm(x, stack + ".final_norm");
    if (encoder) {
      auto first = g_.node("Gather", {x, g_.constant(torch::tensor(int64_t{0}), "first")}, {A::of("axis", 1)});
      auto pooled = g_.node("Tanh", {linear(first, "pooler")});
      g_.node("Identity", {linear(pooled, "classifier")}, {}, "", {"logits"});
      g_.output("logits", OnnxType::Float, {B, c_.n_classes});
    } else {
      if (c_.output_scale != 1.0) x = g_.node("Mul", {x, g_.scalar(static_cast<float>(c_.output_scale))});
      std::string logits = has("lm_head.weight") ? linear(x, "lm_head") : tied_output(x);
      if (has("final_logits_bias")) logits = g_.node("Add", {logits, weight("final_logits_bias")});
      g_.node("Identity", {logits}, {}, "", {"logits"});
      g_.output("logits", OnnxType::Float, {B, T, c_.vocab_size});
      for (const auto& [name, n_kv] : presents_) g_.output(name, OnnxType::Float, {B, n_kv, "total_sequence_length", c_.head_dim});
    }
  }

 private:
  struct Masks {
    std::string additive;  // [B, 1, T or 1, S]: 0 or -1e9 (S = T, or past + T with a cache)
    std::string index;     // [B, T] int32 1/0, for the fused op
    std::string cos, sin;  // [T, R] rotary tables of the positions ([B, 1, T, R] of position_ids with a cache)
    std::string cos_bsnh, sin_bsnh;  // with a cache: [B, T, 1, R], for heads in [B, T, n, D] (GroupQueryAttention)
    std::string seqlens_k, total;    // with a cache: int32 [B] tokens - 1 per row, int32 scalar past + T
  };

  bool has(const std::string& n) const { return s_->count(n) > 0; }
  LazyTensor lazy(const std::string& n, bool transposed) {
    read_.insert(n);
    const auto s = s_;
    const auto& t = s->at(n);
    auto shape = t.sizes().vec();
    if (transposed) std::swap(shape[0], shape[1]);
    return LazyTensor{torch::kFloat32, shape, [s, n, transposed] {
                        const auto& w = s->at(n);
                        return (transposed ? w.t() : w).to(torch::kFloat32).contiguous();
                      }};
  }
  std::string weight(const std::string& n) { return g_.initializer(n, lazy(n, false)); }

  std::string linear(const std::string& x, const std::string& prefix) {
    auto y = g_.node("MatMul", {x, g_.initializer(prefix + ".weight_t", lazy(prefix + ".weight", true))});
    if (has(prefix + ".bias")) y = g_.node("Add", {y, weight(prefix + ".bias")});
    return y;
  }

  // The tied output: Gemm reads the embedding table as it is (transB), on [B*T, C].
  std::string tied_output(const std::string& x) {
    const auto flat = g_.node("Reshape", {x, g_.ints({-1, c_.d_model})});
    const auto y = g_.node("Gemm", {flat, weight("decoder.embed_tokens.weight")}, {A::of("transB", 1)});
    const auto shape = g_.node("Concat", {g_.node("Slice", {g_.node("Shape", {x}), g_.ints({0}), g_.ints({2})}),
                                          g_.ints({c_.vocab_size})},
                               {A::of("axis", 0)});
    return g_.node("Reshape", {y, shape});
  }

  std::string rms(const std::string& x, const std::string& w, double eps) {
    auto ms = g_.node("ReduceMean", {g_.node("Mul", {x, x})}, {A::of_ints("axes", {-1}), A::of("keepdims", 1)});
    auto inv = g_.node("Reciprocal", {g_.node("Sqrt", {g_.node("Add", {ms, g_.scalar(static_cast<float>(eps))})})});
    return g_.node("Mul", {g_.node("Mul", {x, inv}), w});
  }

  std::string norm(const std::string& x, const std::string& prefix) {
    if (c_.norm_kind == NormKind::RmsNorm) return rms(x, weight(prefix + ".weight"), c_.layer_norm_eps);
    return g_.node("LayerNormalization", {x, weight(prefix + ".weight"), weight(prefix + ".bias")},
                   {A::of("axis", -1), A::of_float("epsilon", c_.layer_norm_eps)});
  }

  std::string activate(const std::string& x) {
    switch (c_.activation) {
      case Activation::Relu: return g_.node("Relu", {x});
      case Activation::Silu: return g_.node("Mul", {x, g_.node("Sigmoid", {x})});
      case Activation::Gelu: {  // x * 0.5 * (1 + erf(x / sqrt(2)))
        auto e = g_.node("Erf", {g_.node("Div", {x, g_.scalar(static_cast<float>(std::sqrt(2.0)))})});
        return g_.node("Mul", {x, g_.node("Mul", {g_.scalar(0.5f), g_.node("Add", {e, g_.scalar(1.0f)})})});
      }
      case Activation::GeluTanh: {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        auto cube = g_.node("Mul", {g_.node("Mul", {x, x}), x});
        auto inner = g_.node("Add", {x, g_.node("Mul", {cube, g_.scalar(0.044715f)})});
        auto t = g_.node("Tanh", {g_.node("Mul", {inner, g_.scalar(static_cast<float>(std::sqrt(2.0 / M_PI)))})});
        return g_.node("Mul", {g_.node("Mul", {x, g_.scalar(0.5f)}), g_.node("Add", {t, g_.scalar(1.0f)})});
      }
    }
    return x;
  }

  std::string embed(const std::string& stack, bool encoder) {
    auto x = g_.node("Gather", {weight(stack + ".embed_tokens.weight"), "input_ids"});
    if (kv_) {
      positions_ = "position_ids";  // [B, T]: the caller's (after left padding, HF's cumulative mask - 1)
    } else {
      positions_ = g_.node("Range", {zero(), length("input_ids"), one()});
    }
    if (has(stack + ".embed_positions.weight"))
      x = g_.node("Add", {x, g_.node("Gather", {weight(stack + ".embed_positions.weight"), positions_})});
    if (encoder && has(stack + ".embed_segments.weight"))
      x = g_.node("Add", {x, g_.node("Gather", {weight(stack + ".embed_segments.weight"), "token_type_ids"})});
    if (has(stack + ".embed_norm.weight")) x = norm(x, stack + ".embed_norm");
    return x;
  }

  std::string zero() { return g_.constant(torch::tensor(int64_t{0}), "zero"); }
  std::string one() { return g_.constant(torch::tensor(int64_t{1}), "one"); }
  std::string length(const std::string& input) { return g_.node("Gather", {g_.node("Shape", {input}), one()}); }

  Masks make_masks(bool encoder) {
    Masks m;
    auto keep = g_.node("Cast", {std::string("attention_mask")}, {A::of("to", static_cast<int64_t>(OnnxType::Float))});
    auto padding = g_.node("Mul", {g_.node("Sub", {g_.scalar(1.0f), keep}), g_.scalar(kMasked)});
    m.additive = g_.node("Unsqueeze", {padding, g_.ints({1, 2})});  // [B, 1, 1, S]
    m.index = g_.node("Cast", {std::string("attention_mask")}, {A::of("to", static_cast<int64_t>(OnnxType::Int32))});
    if (!encoder) {  // causal (and a sliding window): key > query, or key <= query - window
      // Query i of T sits at place S - T + i of the S keys (the cache's past first); without one S = T.
      std::string qi = positions_, ki = positions_;
      if (kv_) {
        const auto S = length("attention_mask");
        ki = g_.node("Range", {zero(), S, one()});
        qi = g_.node("Range", {g_.node("Sub", {S, length("input_ids")}), S, one()});
      }
      auto q = g_.node("Unsqueeze", {qi, g_.ints({1})}), k = g_.node("Unsqueeze", {ki, g_.ints({0})});
      auto blocked = g_.node("Greater", {k, q});
      if (c_.sliding_window > 0)
        blocked = g_.node("Or", {blocked, g_.node("LessOrEqual", {k, g_.node("Sub", {q, g_.ints({c_.sliding_window})})})});
      auto causal = g_.node("Where", {blocked, g_.scalar(kMasked), g_.scalar(0.0f)});  // [T, S]
      m.additive = g_.node("Add", {causal, m.additive});                           // [B, 1, T, S]
    }
    if (c_.positional == Positional::Rotary) {
      const Rope r = rope_tables(rope_inv_freq(c_), 0, c_.max_positions, torch::kFloat32);
      m.cos = g_.node("Gather", {g_.constant(r.cos, "rope_cos"), positions_});
      m.sin = g_.node("Gather", {g_.constant(r.sin, "rope_sin"), positions_});
      if (kv_) {
        m.cos_bsnh = g_.node("Unsqueeze", {m.cos, g_.ints({2})}), m.sin_bsnh = g_.node("Unsqueeze", {m.sin, g_.ints({2})});
        m.cos = g_.node("Unsqueeze", {m.cos, g_.ints({1})}), m.sin = g_.node("Unsqueeze", {m.sin, g_.ints({1})});
      }
    }
    if (kv_) {  // GroupQueryAttention's lengths: each row's real tokens (right-padded rows) and the whole width
      const auto tokens = g_.node("ReduceSum", {std::string("attention_mask"), g_.ints({1})}, {A::of("keepdims", 0)});
      m.seqlens_k = g_.node("Cast", {g_.node("Sub", {tokens, one()})}, {A::of("to", static_cast<int64_t>(OnnxType::Int32))});
      m.total = g_.node("Cast", {length("attention_mask")}, {A::of("to", static_cast<int64_t>(OnnxType::Int32))});
    }
    return m;
  }

  // [B, T, n*D] -> [B, n, T, D]
  std::string heads(const std::string& x, int64_t n) {
    return g_.node("Transpose", {g_.node("Reshape", {x, g_.ints({0, 0, n, c_.head_dim})})}, {A::of_ints("perm", {0, 2, 1, 3})});
  }

  // x with heads on axis 2 or 1 ([B, n, T, D] with cos/sin [., 1, T, R], or [B, T, n, D] with [B, T, 1, R]).
  std::string rope(const std::string& x, const Masks& m) { return rope(x, m.cos, m.sin); }
  std::string rope(const std::string& x, const std::string& cos, const std::string& sin) {
    const int64_t D = c_.head_dim, R = c_.rotary_dim > 0 ? c_.rotary_dim : D, half = R / 2;
    auto slice = [&](const std::string& t, int64_t a, int64_t b) { return g_.node("Slice", {t, g_.ints({a}), g_.ints({b}), g_.ints({3})}); };
    const auto part = R < D ? slice(x, 0, R) : x;
    auto rotated = g_.node("Concat", {g_.node("Neg", {slice(part, half, R)}), slice(part, 0, half)}, {A::of("axis", 3)});
    auto out = g_.node("Add", {g_.node("Mul", {part, cos}), g_.node("Mul", {rotated, sin})});
    return R < D ? g_.node("Concat", {out, slice(x, R, D)}, {A::of("axis", 3)}) : out;
  }

  bool fusable(const HeadGeometry& g) const {
    if (kv_) return groups_consecutive(g);
    return c_.arch == Arch::EncoderClassifier && g.n_kv_heads_kept() == g.n_heads_kept() && !g.qk_norm &&
           c_.positional != Positional::Rotary && g.scaled;
  }
  // GroupQueryAttention's grouping: query head i reads key/value head i / (H / G).
  static bool groups_consecutive(const HeadGeometry& g) {
    const int64_t H = g.n_heads_kept(), G = g.n_kv_heads_kept();
    if (G == 0 || H % G != 0 || g.head_dim % 8 != 0) return false;  // ORT's kernels: head sizes in steps of 8
    const auto kv = g.kv_positions();
    for (int64_t i = 0; i < H; ++i)
      if (kv[static_cast<size_t>(i)] != i / (H / G)) return false;
    return true;
  }

  // A cached decoder layer as ONNX Runtime's GroupQueryAttention (com.microsoft): q, k, v in [B, T, n*D]
  // (per-head norms and rotary applied here, in standard ops), the past in and the present out in optimum's
  // names, causal over past + T, the sliding window as local_window_size. Its lengths come from
  // attention_mask's row sums: right-padded rows or none (left padding is for the standard ops).
  std::string group_query_attention(const std::string& h, const HeadGeometry& geo, const std::string& p, int64_t l,
                                    const Masks& m) {
    const int64_t H = geo.n_heads_kept(), G = geo.n_kv_heads_kept(), D = c_.head_dim;
    auto prepare = [&](const std::string& proj, int64_t n, const std::string& norm_w) {
      auto x = g_.node("Reshape", {linear(h, p + proj), g_.ints({0, 0, n, D})});  // [B, T, n, D]
      if (geo.qk_norm) x = rms(x, weight(norm_w), geo.norm_eps);
      if (!m.cos_bsnh.empty()) x = rope(x, m.cos_bsnh, m.sin_bsnh);
      return g_.node("Reshape", {x, g_.ints({0, 0, n * D})});
    };
    const auto q = prepare(".q_proj", H, p + ".q_norm.weight"), k = prepare(".k_proj", G, p + ".k_norm.weight");
    const auto v = linear(h, p + ".v_proj");
    const std::string past = "past_key_values." + std::to_string(l), present = "present." + std::to_string(l);
    for (const char* what : {".key", ".value"})
      g_.input(past + what, OnnxType::Float, {"batch_size", G, "past_sequence_length", D});
    presents_.emplace_back(present + ".key", G);
    presents_.emplace_back(present + ".value", G);
    ++out_.cached_layers;
    std::vector<OnnxAttr> attrs{A::of("num_heads", H), A::of("kv_num_heads", G),
                                A::of_float("scale", geo.score_scale())};
    if (c_.sliding_window > 0) attrs.push_back(A::of("local_window_size", c_.sliding_window));
    return g_.node("GroupQueryAttention", {q, k, v, past + ".key", past + ".value", m.seqlens_k, m.total}, attrs,
                   "com.microsoft", {"gqa_out_" + std::to_string(l), present + ".key", present + ".value"});
  }

  std::string attention(const std::string& h, AttnType type, int64_t l, const Masks& m) {
    const HeadGeometry geo = head_geometry(c_, type, l);
    const std::string p = attention_prefix(type, l);
    const int64_t H = geo.n_heads_kept(), G = geo.n_kv_heads_kept(), D = c_.head_dim;
    if (H == 0) {
      ++out_.empty_layers;
      return has(p + ".o_proj.bias") ? weight(p + ".o_proj.bias") : "";
    }
    // Auto fuses encoders; a cached decoder only on request (GroupQueryAttention reads right padding only).
    const bool fuse = attention_ == OnnxAttention::Fused || (attention_ == OnnxAttention::Auto && !kv_ && fusable(geo));
    require(!fuse || fusable(geo), "layer " + std::to_string(l) + " cannot be ONNX Runtime's fused " +
                                       (kv_ ? "GroupQueryAttention (its key/value heads do not each serve the same "
                                              "number of consecutive query heads)"
                                            : "Attention (rotary positions, grouped key/value heads or per-head norms)") +
                                       "; use --onnx-attention standard or auto");
    std::string ctx;
    if (fuse && kv_) {
      ++out_.fused_layers;
      ctx = group_query_attention(h, geo, p, l, m);
    } else if (fuse) {
      ++out_.fused_layers;
      const auto s = s_;
      const int64_t C = c_.d_model, W = H * D;
      for (const char* proj : {".q_proj.", ".k_proj.", ".v_proj."})
        for (const char* what : {"weight", "bias"}) read_.insert(p + proj + what);
      auto w = g_.initializer(p + ".qkv_weight", LazyTensor{torch::kFloat32, {C, 3 * W}, [s, p] {
                                return torch::cat({s->at(p + ".q_proj.weight"), s->at(p + ".k_proj.weight"), s->at(p + ".v_proj.weight")})
                                    .t().to(torch::kFloat32).contiguous();
                              }});
      auto b = g_.initializer(p + ".qkv_bias", LazyTensor{torch::kFloat32, {3 * W}, [s, p, W] {
                                if (!s->count(p + ".q_proj.bias")) return torch::zeros({3 * W});
                                return torch::cat({s->at(p + ".q_proj.bias"), s->at(p + ".k_proj.bias"), s->at(p + ".v_proj.bias")})
                                    .to(torch::kFloat32).contiguous();
                              }});
      ctx = g_.node("Attention", {h, w, b, m.index}, {A::of("num_heads", H)}, "com.microsoft");
    } else {
      ++out_.standard_layers;
      auto q = heads(linear(h, p + ".q_proj"), H), k = heads(linear(h, p + ".k_proj"), G), v = heads(linear(h, p + ".v_proj"), G);
      if (geo.qk_norm) q = rms(q, weight(p + ".q_norm.weight"), geo.norm_eps), k = rms(k, weight(p + ".k_norm.weight"), geo.norm_eps);
      if (!m.cos.empty()) q = rope(q, m), k = rope(k, m);
      if (kv_) k = cached(k, "key", l, G), v = cached(v, "value", l, G);
      const auto kv = geo.kv_positions();
      bool identity = G == H;
      for (int64_t i = 0; identity && i < H; ++i) identity = kv[static_cast<size_t>(i)] == i;
      if (!identity) {  // each query head's key/value head (uneven groups too)
        const auto idx = g_.ints(kv);
        k = g_.node("Gather", {k, idx}, {A::of("axis", 1)});
        v = g_.node("Gather", {v, idx}, {A::of("axis", 1)});
      }
      auto scores = g_.node("MatMul", {g_.node("Mul", {q, g_.scalar(static_cast<float>(geo.score_scale()))}),
                                       g_.node("Transpose", {k}, {A::of_ints("perm", {0, 1, 3, 2})})});
      auto probs = g_.node("Softmax", {g_.node("Add", {scores, m.additive})}, {A::of("axis", -1)});
      auto c = g_.node("Transpose", {g_.node("MatMul", {probs, v})}, {A::of_ints("perm", {0, 2, 1, 3})});
      ctx = g_.node("Reshape", {c, g_.ints({0, 0, H * D})});
    }
    return linear(ctx, p + ".o_proj");
  }

  // The layer's past keys or values before this call's: an input past_key_values.L.key [B, G, P, D], and
  // the whole as the output present.L.key [B, G, P + T, D] (optimum's names; a layer without heads has neither).
  std::string cached(const std::string& x, const std::string& what, int64_t l, int64_t n_kv) {
    const std::string past = "past_key_values." + std::to_string(l) + "." + what, present = "present." + std::to_string(l) + "." + what;
    g_.input(past, OnnxType::Float, {"batch_size", n_kv, "past_sequence_length", c_.head_dim});
    presents_.emplace_back(present, n_kv);
    if (what == "key") ++out_.cached_layers;
    return g_.node("Concat", {past, x}, {A::of("axis", 2)}, "", {present});
  }

  std::string ffn(const std::string& h, const std::string& p) {
    if (has(p + ".gate.weight")) return linear(g_.node("Mul", {activate(linear(h, p + ".gate")), linear(h, p + ".fc1")}), p + ".fc2");
    return linear(activate(linear(h, p + ".fc1")), p + ".fc2");
  }

  // Pre-norm: x + f(norm(x)); post-norm: norm(x + f(x)). An empty f (an emptied layer without bias) adds nothing.
  template <typename F>
  std::string sublayer(const std::string& x, const std::string& norm_prefix, F&& f) {
    if (c_.norm == NormPosition::Pre) {
      const auto y = f(norm(x, norm_prefix));
      return y.empty() ? x : g_.node("Add", {x, y});
    }
    const auto y = f(x);
    return norm(y.empty() ? x : g_.node("Add", {x, y}), norm_prefix);
  }

  std::string layer(const std::string& x, AttnType type, int64_t l, const Masks& m) {
    const std::string p = (type == AttnType::EncoderSelf ? "encoder" : "decoder") + std::string(".layers.") + std::to_string(l);
    auto y = sublayer(x, p + ".self_attn_norm", [&](const std::string& h) { return attention(h, type, l, m); });
    return sublayer(y, p + ".ffn_norm", [&](const std::string& h) { return ffn(h, p + ".ffn"); });
  }

  OnnxExport& out_;
  OnnxGraph& g_;
  const ModelConfig& c_;
  std::shared_ptr<const TensorMap> s_;
  OnnxAttention attention_;
  bool kv_;
  std::string positions_;
  std::vector<std::pair<std::string, int64_t>> presents_;  // outputs after the logits, with their key/value heads
  std::set<std::string> read_;  // the model's tensors the graph holds

 public:
  const std::set<std::string>& read() const { return read_; }
};

}  // namespace

OnnxAttention parse_onnx_attention(const std::string& s) {
  if (s == "auto") return OnnxAttention::Auto;
  if (s == "fused") return OnnxAttention::Fused;
  if (s == "standard") return OnnxAttention::Standard;
  throw std::invalid_argument("ONNX attention '" + s + "': expected auto, fused or standard");
}

OnnxExport to_onnx(TransformerImpl& model, OnnxAttention attention, bool kv_cache) {
  const ModelConfig& cfg0 = model.config();
  require(cfg0.arch != Arch::EncoderDecoder, "encoder-decoders are not written to ONNX (encoder classifiers and decoder LMs are)");
  require(!kv_cache || cfg0.arch == Arch::DecoderLM, "a key/value cache is for decoder LMs (this model is " +
                                                         std::string(to_string(cfg0.arch)) + ")");
  // The allow-list: what the graph computes (relative positions, a sinusoid and a target vocabulary are
  // encoder-decoder or T5/Marian features the writer has no nodes for).
  static const std::set<std::string> expressible = {
      "arch",          "vocab_size",      "d_model",        "d_ff",           "n_heads",         "head_dim",
      "n_kv_heads",    "heads",           "n_encoder_layers", "n_decoder_layers", "max_positions", "layer_norm_eps",
      "activation",    "pad_id",          "tie_embeddings", "positional",     "rope_theta",      "rope_scaling",
      "rotary_dim",    "norm",            "norm_kind",      "gated_ffn",      "embed_layer_norm", "qkv_bias",
      "o_bias",        "mlp_bias",        "qk_norm",        "sliding_window", "scaled_attention", "output_scale",
      "logits_bias",   "n_segments",      "n_classes"};
  require_expressible(cfg0, expressible, "ONNX export");
  require(cfg0.positional == Positional::Learned || cfg0.positional == Positional::Rotary,
          std::string("positional '") + to_string(cfg0.positional) + "' is not written to ONNX (learned and rotary are)");
  Transformer pruned{nullptr};
  if (const auto masked = model.masked_heads(); !masked.empty()) pruned = remove_heads(model, masked, /*share_untouched=*/true);
  TransformerImpl& m = pruned ? *pruned : model;
  OnnxExport out;
  const ModelConfig cfg = m.config();
  out.kv_cache = kv_cache;
  const auto state = std::make_shared<const TensorMap>(state_dict(m));
  Builder b(out, cfg, state, attention, kv_cache);
  b.build();
  check_every_tensor_written(*state, b.read(), std::string("ONNX export (") + to_string(cfg.arch) + ")");
  return out;
}

}  // namespace hp
