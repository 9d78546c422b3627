// Multi-head and grouped-query attention with per-head masks; see the header for the dimension legend.
#include "headprune/model/attention.h"

#include "headprune/util/gemm.h"
#include "headprune/util/interrupt.h"
#include "headprune/util/torch_compat.h"

#include <algorithm>
#include <cmath>

namespace hp {

MultiHeadAttentionImpl::MultiHeadAttentionImpl(HeadGeometry geometry, double attention_dropout)
    : geometry_(std::move(geometry)), attention_dropout_(attention_dropout) {
  const int64_t C = geometry_.d_model;
  q_proj = register_module("q_proj", Dense(C, geometry_.q_width(), geometry_.qkv_bias));
  k_proj = register_module("k_proj", Dense(C, geometry_.kv_width(), geometry_.qkv_bias));
  v_proj = register_module("v_proj", Dense(C, geometry_.kv_width(), geometry_.qkv_bias));
  o_proj = register_module("o_proj", Dense(geometry_.q_width(), C, geometry_.o_bias));
  if (geometry_.qk_norm) {
    q_norm = register_module("q_norm", Norm(geometry_.head_dim, geometry_.norm_eps, NormKind::RmsNorm));
    k_norm = register_module("k_norm", Norm(geometry_.head_dim, geometry_.norm_eps, NormKind::RmsNorm));
  }
  head_mask = register_buffer("head_mask", torch::ones({n_heads_kept()}));
  if (geometry_.grouped()) {
    const auto kv = geometry_.kv_positions();
    kv_index_ = torch::tensor(kv, torch::kLong);
    // Even groups in order (position p reads key/value head p / r): a decoding step can attend per group.
    const int64_t H = n_heads_kept(), G = geometry_.n_kv_heads_kept();
    const int64_t r = G > 0 && H % G == 0 ? H / G : 0;
    bool even = r > 1;
    for (int64_t p = 0; even && p < H; ++p) even = kv[p] == p / r;
    even_group_ = even ? r : 0;
  }
}

namespace {
// [B, L, H*D] -> [B, H, L, D]
torch::Tensor split_heads(const torch::Tensor& x, int64_t H, int64_t D) {
  return x.view({x.size(0), x.size(1), H, D}).transpose(1, 2);
}

// Identifies a tensor's current contents for the caches below: its storage and in-place version
// (optimizer steps, loading and mask changes bump the version; conversions change the storage).
std::pair<const void*, int64_t> stamp(const torch::Tensor& t) {
  if (!t.defined()) return {nullptr, 0};
  return {t.data_ptr(), t.is_inference() ? 0 : static_cast<int64_t>(t._version())};
}
}  // namespace

bool MultiHeadAttentionImpl::inference_path() const {
  return !is_training() && !torch::GradMode::is_enabled() && !lrp::active() && !q_proj->quantized();
}

bool MultiHeadAttentionImpl::fusion_pays() const {
  // The concatenated copy is kept beside the weights: worth it for models whose weights are small next
  // to memory, not for a 7B model (50 MB per layer, 1.6 GB in all, on top of weights that fill memory).
  const int64_t bytes = (q_proj->weight.numel() + k_proj->weight.numel() + v_proj->weight.numel()) *
                        static_cast<int64_t>(q_proj->weight.element_size());
  return bytes <= (int64_t{16} << 20);
}

namespace {

// Weights derived from the model's own (the concatenated Q/K/V matrix, the open heads' o_proj columns)
// are made as normal tensors even under InferenceMode (bench, eval): the packed-weight cache
// (util/gemm.h) takes normal tensors only, and an inference tensor would send its every product to
// OpenBLAS, unpacked (at batch 1 x 32 on BERT-base, 2x slower for that product).
struct DerivedWeightScope {
  c10::InferenceMode normal{false};
  torch::NoGradGuard no_grad;
};

}  // namespace

const MultiHeadAttentionImpl::Fused& MultiHeadAttentionImpl::fused(Fused& f, std::vector<const DenseImpl*> parts) {
  std::vector<std::pair<const void*, int64_t>> stamps;
  for (const auto* p : parts) {
    stamps.push_back(stamp(p->weight));
    stamps.push_back(stamp(p->bias));
  }
  if (stamps != f.stamps) {
    DerivedWeightScope scope;
    std::vector<torch::Tensor> w, b;
    for (const auto* p : parts) {
      w.push_back(p->weight);
      b.push_back(p->bias.defined() ? p->bias : torch::zeros({p->weight.size(0)}, p->weight.options()));
    }
    f.weight = torch::cat(w, 0).contiguous();
    f.bias = torch::cat(b, 0).contiguous();
    f.stamps = std::move(stamps);
  }
  return f;
}

std::vector<torch::Tensor> MultiHeadAttentionImpl::derived_weights() const {
  std::vector<torch::Tensor> out;
  for (const Fused* f : {&qkv_, &kv_, &open_o_})
    if (f->weight.defined()) out.push_back(f->weight);
  return out;
}

bool MultiHeadAttentionImpl::all_unmasked() {
  auto s = stamp(head_mask);
  if (s != mask_stamp_) {
    all_unmasked_ = head_mask.eq(1).all().item<bool>();
    open_heads_ = head_mask.ne(0).nonzero().flatten();
    mask_stamp_ = s;
  }
  return all_unmasked_;
}

torch::Tensor MultiHeadAttentionImpl::expand_kv(const torch::Tensor& t) {
  if (!geometry_.grouped()) return t;
  if (kv_index_.device() != t.device()) kv_index_ = kv_index_.to(t.device());
  return t.index_select(1, kv_index_);
}

torch::Tensor MultiHeadAttentionImpl::no_heads_forward(const torch::Tensor& query, const torch::Tensor& key_value,
                                                       torch::Tensor* probs_out, const KVCache* cache, bool static_kv) {
  const int64_t B = query.size(0), T = query.size(1);
  // Every head removed: the block contributes only o_proj's bias; skip all attention work.
  if (probs_out) {
    const int64_t S = (cache && cache->k.defined() && static_kv) ? cache->k.size(2)
                      : (cache && cache->k.defined())             ? cache->k.size(2) + key_value.size(1)
                                                                  : key_value.size(1);
    *probs_out = torch::zeros({B, 0, T, S}, query.options());
  }
  return bias_only(B, T, query.options());
}

torch::Tensor MultiHeadAttentionImpl::bias_only(int64_t B, int64_t T, const torch::TensorOptions& options) const {
  const int64_t C = geometry_.d_model;
  if (!o_proj->bias.defined()) return torch::zeros({B, T, C}, options);
  return o_proj->bias.expand({B, T, C}).contiguous();
}

torch::Tensor MultiHeadAttentionImpl::project_out(const torch::Tensor& ctx) {
  const int64_t B = ctx.size(0), H = ctx.size(1), T = ctx.size(2), D = ctx.size(3);
  if (!inference_path() || all_unmasked() || head_probe.defined() || open_heads_.numel() == H)
    return o_proj(ctx.transpose(1, 2).reshape({B, T, H * D}));
  // Masked heads (entry 0) leave the product, as if removed; the others keep their scaled context.
  const int64_t open = open_heads_.numel();
  if (open == 0) return bias_only(B, T, ctx.options());
  if (open_heads_.device() != ctx.device()) open_heads_ = open_heads_.to(ctx.device());
  const auto columns = [&] {
    const int64_t C = o_proj->weight.size(0);
    return o_proj->weight.view({C, H, D}).index_select(1, open_heads_).reshape({C, open * D});
  };
  torch::Tensor w;
  if (fusion_pays()) {  // small layers keep the selected columns while weights and mask are unchanged
    std::vector<std::pair<const void*, int64_t>> stamps{stamp(o_proj->weight), mask_stamp_};
    if (stamps != open_o_.stamps) {
      DerivedWeightScope scope;
      open_o_ = {std::move(stamps), columns(), {}};
    }
    w = open_o_.weight;
  } else {
    w = columns();
  }
  return gemm::linear(ctx.index_select(1, open_heads_).transpose(1, 2).reshape({B, T, open * D}), w, o_proj->bias);
}

// q [B, H, T, D]; k, v [B, G, S, D] (left undefined when reuse_kv). Inference: one GEMM for Q, K and
// V (self-attention) or for K and V (cross-attention), with the projection weights concatenated once
// and reused while they are unchanged.
void MultiHeadAttentionImpl::project(const torch::Tensor& query, const torch::Tensor& key_value, bool reuse_kv,
                                     torch::Tensor& q, torch::Tensor& k, torch::Tensor& v) {
  const int64_t B = query.size(0), T = query.size(1), H = n_heads_kept(), D = geometry_.head_dim;
  const int64_t G = geometry_.n_kv_heads_kept();
  const bool fuse = inference_path() && fuse_projections && fusion_pays();
  if (fuse && !reuse_kv && query.is_same(key_value)) {
    const auto& f = fused(qkv_, {q_proj.get(), k_proj.get(), v_proj.get()});
    auto qkv = gemm::linear(query, f.weight, f.bias);
    if (G == H) {
      qkv = qkv.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      q = split_heads(qkv.narrow(2, 0, H * D), H, D);
      k = split_heads(qkv.narrow(2, H * D, G * D), G, D);
      v = split_heads(qkv.narrow(2, (H + G) * D, G * D), G, D);
    }
    return;
  }
  q = split_heads(q_proj(query), H, D);
  if (!reuse_kv && fuse) {
    const auto& f = fused(kv_, {k_proj.get(), v_proj.get()});
    auto kv = gemm::linear(key_value, f.weight, f.bias).view({B, key_value.size(1), 2, G, D}).permute({2, 0, 3, 1, 4});
    k = kv[0], v = kv[1];
  } else if (!reuse_kv) {
    k = split_heads(k_proj(key_value), G, D);
    v = split_heads(v_proj(key_value), G, D);
  }
}

namespace {

// Writes the new positions k, v [B, G, T, D] after the cached ones, moving the cache into larger buffers
// (the positions needed plus half as many again, at least 64 more) when they lack room or when
// cache.k is not the start of cache.k_buf.
void append_to_cache(KVCache& cache, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t S = cache.k.defined() ? cache.k.size(2) : 0, T = k.size(2), need = S + T;
  const bool in_place = cache.k.defined() && cache.k_buf.defined() && cache.k.data_ptr() == cache.k_buf.data_ptr() &&
                        cache.v.data_ptr() == cache.v_buf.data_ptr() && cache.k_buf.size(2) >= need &&
                        cache.k_buf.size(0) == k.size(0) && cache.k_buf.size(1) == k.size(1) &&
                        cache.k_buf.scalar_type() == k.scalar_type();
  if (!in_place) {
    const int64_t capacity = need + std::max<int64_t>(64, need / 2);
    auto grow = [&](const torch::Tensor& old, const torch::Tensor& like) {
      auto buf = torch::empty({like.size(0), like.size(1), capacity, like.size(3)}, like.options());
      if (S > 0) buf.narrow(2, 0, S).copy_(old);
      return buf;
    };
    cache.k_buf = grow(cache.k, k);
    cache.v_buf = grow(cache.v, v);
  }
  cache.k_buf.narrow(2, S, T).copy_(k);
  cache.v_buf.narrow(2, S, T).copy_(v);
  cache.k = cache.k_buf.narrow(2, 0, need);
  cache.v = cache.v_buf.narrow(2, 0, need);
}

}  // namespace

// The keys and values attended to: the cache's (reuse_kv), or the new ones after the cached ones
// (self-attention), which the cache then holds.
void MultiHeadAttentionImpl::use_cache(KVCache* cache, bool static_kv, bool reuse_kv, torch::Tensor& k,
                                       torch::Tensor& v) {
  if (reuse_kv) {
    k = cache->k;
    v = cache->v;
  } else if (cache && static_kv) {
    cache->k = k;
    cache->v = v;
  } else if (cache && cache->write_at.defined()) {  // fixed capacity: written in place, attended whole
    cache->k_buf.index_copy_(2, cache->write_at, k);
    cache->v_buf.index_copy_(2, cache->write_at, v);
    k = cache->k = cache->k_buf;
    v = cache->v = cache->v_buf;
  } else if (cache && torch::GradMode::is_enabled() && k.requires_grad()) {
    // Recorded by autograd: new tensors each step (writing into buffers would change saved views).
    if (cache->k.defined()) {
      k = torch::cat({cache->k, k}, 2);
      v = torch::cat({cache->v, v}, 2);
    }
    cache->k = k;
    cache->v = v;
  } else if (cache) {
    append_to_cache(*cache, k, v);
    k = cache->k;
    v = cache->v;
  }
}

// The context [B, H, T, D] of q [B, H, T, D] over k, v [B, H, S, D].
torch::Tensor MultiHeadAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const torch::Tensor& mask, torch::Tensor* probs_out) {
  const bool reduced = q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kHalf;
  if (reduced && q.is_cpu() && q.numel() * k.size(2) <= (int64_t{1} << 22)) {
    // LibTorch 1.13 multiplies batches of bf16 matrices on the CPU with oneDNN, which rounds once,
    // only above 16^3 multiply-adds in all; below, with a kernel that rounds as it accumulates, so a
    // small layer's scores depended on how many heads it had. Small cores (at most 4M multiply-adds:
    // fp32 copies of a few MB) run in fp32 from the bf16 q, k, v and their context is rounded once.
    const auto dtype = q.scalar_type();
    auto ctx = attend(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat),
                      mask.defined() ? mask.to(torch::kFloat) : mask, probs_out);
    if (probs_out) *probs_out = probs_out->to(dtype);
    return ctx.to(dtype);
  }
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const double scale = geometry_.score_scale();
  torch::Tensor ctx;
  if (!is_training() && !torch::GradMode::is_enabled() && !lrp::active() && !head_probe.defined()) {
    // Inference (int8 projections too) on oneDNN: q, k, v read in place, the context stored as
    // [B, T, H*D], what o_proj reads (util/gemm.h); undefined when oneDNN does not take the shapes.
    const auto fused = gemm::attention(q, k, v, mask, scale, probs_out);
    if (fused.defined()) ctx = fused.view({B, T, H, D}).transpose(1, 2);
    // Elsewhere (CUDA, or a CPU build without oneDNN) LibTorch's fused attention where the build has
    // it (2.1 and later: flash or memory-efficient kernels on a GPU). Exact with head gates: they scale
    // each head's context below, after attention.
    if (!ctx.defined() && !probs_out && compat::has_fused_attention()) ctx = compat::fused_attention(q, k, v, mask, scale);
  }
  if (!ctx.defined()) {
    // Scaling the queries costs T*D per head instead of T*S for the scores.
    auto scores = torch::matmul(q * scale, k.transpose(-2, -1));
    if (mask.defined()) scores.add_(mask);  // [B, H, T, S]
    auto probs = torch::softmax(scores, -1);
    if (probs_out) *probs_out = probs;
    auto p = torch::dropout(probs, attention_dropout_, is_training());
    ctx = lrp::mix(p, v);
  }
  return ctx;
}

// A decoding step (one query position, a mask alike for all heads or none) of grouped-query attention with even groups, at
// inference: the r query heads of a group attend to its keys as r queries of one head, so the cached
// keys and values are read in place instead of repeated per query head. Undefined otherwise.
torch::Tensor MultiHeadAttentionImpl::grouped_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                   const torch::Tensor& mask, torch::Tensor* probs_out) {
  if (even_group_ == 0 || q.size(2) != 1 || (mask.defined() && (mask.dim() != 4 || mask.size(1) != 1)) || probs_out ||
      is_training() || torch::GradMode::is_enabled() || lrp::active() || head_probe.defined())
    return {};
  const int64_t B = q.size(0), G = k.size(1), D = q.size(3);
  // A mask [B or 1, 1, 1, S] (a fixed-capacity cache's unwritten positions, a sliding window) is the
  // same for every query head, so it broadcasts over the group's r rows.
  auto ctx = attend(q.reshape({B, G, even_group_, D}), k, v, mask, nullptr);  // [B, G, r, D]
  return ctx.reshape({B, G * even_group_, 1, D});
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& key_value,
                                              const torch::Tensor& mask, torch::Tensor* probs_out,
                                              KVCache* cache, bool static_kv, const Rope* rope) {
  interruption_point();
  const int64_t H = n_heads_kept();
  if (H == 0) return no_heads_forward(query, key_value, probs_out, cache, static_kv);
  const bool reuse_kv = cache && static_kv && cache->k.defined();
  torch::Tensor q, k, v;  // q [B, H, T, D]; k, v [B, G, S, D]
  project(query, key_value, reuse_kv, q, k, v);
  if (q_norm) {  // per head, over head_dim (Qwen3)
    q = q_norm(q);
    if (!reuse_kv) k = k_norm(k);
  }
  if (rope) {
    q = apply_rope(q, *rope);
    if (!reuse_kv) k = apply_rope(k, *rope);
  }
  use_cache(cache, static_kv, reuse_kv, k, v);
  torch::Tensor ctx = grouped_step(q, k, v, mask, probs_out);
  if (!ctx.defined()) ctx = attend(q, expand_kv(k), expand_kv(v), mask, probs_out);  // [B, H, T, D]
  // Multiplying by a mask of ones changes nothing, forward or backward, unless its gradient is wanted
  // (gradient importance): skip it, in training too.
  if (head_mask.requires_grad() || !all_unmasked()) ctx = ctx * head_mask.to(ctx.scalar_type()).view({1, H, 1, 1});
  if (head_probe.defined()) ctx = lrp::probe(ctx, head_probe);
  if (on_context) on_context(ctx);
  return project_out(ctx);
}

}  // namespace hp
