// Multi-head and grouped-query attention with a mask entry per head and heterogeneous head counts.
//
// Dimension legend: B batch, T query length, S key length, C d_model, H query heads kept in this
// layer (may be 0), G key/value heads kept, D head dim (model/geometry.h: which rows each head owns).
// Parameters: q_proj weight [H*D, C] (bias [H*D]); k_proj/v_proj weight [G*D, C] (bias [G*D]);
// o_proj weight [C, H*D] (bias [C], whole under pruning); head_mask buffer [H] (ones = nothing masked).
// Head h's context is multiplied by head_mask[h] before o_proj, so 0 removes exactly its contribution.
// head_probe (not saved) multiplies it once more: importance scoring sets it to a leaf of ones whose
// gradient is Michel et al.'s d loss / d xi_h, and learned gates (prune/gates.h) put their samples there.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "headprune/model/geometry.h"
#include "headprune/model/layers.h"
#include "headprune/model/rotary.h"

namespace hp {

// Keys/values of earlier decoding steps (self-attention) or of the encoder output (cross).
// Self-attention's keys and values grow in place: k and v are the first S positions of k_buf and v_buf,
// which hold room for more (half as many again, at least 64), so a decoding step copies only its new
// position; a cache whose k is not a view of k_buf (reordered by beam search, or set from outside) moves
// into new buffers at its next step.
//
// A cache of fixed capacity (write_at defined: a CUDA graph replays a decoding step at the same
// addresses every time) does not grow: the new keys and values are written into k_buf and v_buf at the
// positions write_at holds, on the device, and the whole buffers are attended; the caller's mask blocks
// the positions not written yet.
struct KVCache {
  torch::Tensor k, v;  // [B, G, S, D] the cached positions of the G key/value heads
  torch::Tensor k_buf, v_buf;  // [B, G, capacity, D] (self-attention only)
  torch::Tensor write_at;  // [T] int64 on the device: the positions of the new keys (fixed capacity)
};

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  MultiHeadAttentionImpl(HeadGeometry geometry, double attention_dropout);

  // query [B, T, C]; key_value [B, S, C] (the same tensor for self-attention);
  // mask additive, broadcastable to [B, H, T, S] (0 = attend, large negative = blocked),
  // or undefined. If probs_out is non-null it receives the attention probabilities
  // [B, H, T, S] (after masking, before dropout). Returns [B, T, C].
  // cache (optional): for self-attention new keys/values are appended; for cross-attention
  // (static_kv) keys/values are computed once and reused. The cache holds the G key/value heads.
  // In eval mode without gradients (and outside LRP) the inference path runs: Q/K/V (or K/V) in
  // one GEMM with concatenated weights (rebuilt whenever a projection changes), and the mask
  // multiply skipped while every head is unmasked; a head whose mask entry is 0 is left out of
  // o_proj's product instead of entering it as zeros, so that a masked model sums what the model with
  // those heads removed sums (in bf16 the zero columns changed oneDNN's accumulation enough to flip
  // the last bit of one output in 4000). Results equal the training path up to rounding.
  // rope (self-attention of rotary models): the new queries and keys are rotated by the tables of
  // their positions before the keys join the cache.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const torch::Tensor& mask, torch::Tensor* probs_out = nullptr,
                        KVCache* cache = nullptr, bool static_kv = false, const Rope* rope = nullptr);

  const HeadGeometry& geometry() const { return geometry_; }
  int64_t n_heads_kept() const { return geometry_.n_heads_kept(); }
  const std::vector<int64_t>& kept_heads() const { return geometry_.heads; }
  // Position of an original head id in this layer, or -1 if it is not kept.
  int64_t position_of(int64_t original_head) const { return geometry_.position_of(original_head); }

  Dense q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  Norm q_norm{nullptr}, k_norm{nullptr};  // geometry.qk_norm only: RMSNorm weight [D] on each query / key head
  torch::Tensor head_mask;  // [H]

  // Hooks, unset in normal use (importance scoring and learned gates set and clear them):
  // head_probe, broadcastable to [B, H, T, 1] (e.g. ones [B, H, 1, 1] with requires_grad), multiplies
  // the context after head_mask, so its gradient is the per-example (or per-token) d loss / d xi_h;
  // under lrp::Scope its gradient is the relevance of each head's output.
  torch::Tensor head_probe;
  // Called with the gated context [B, H, T, D] of every forward pass.
  std::function<void(const torch::Tensor&)> on_context;
  // Called by the layer that owns this attention with its residual input x [B, T, C] and the
  // attention's output [B, T, C] (before dropout): the sub-layer adds them (layer-drop scoring).
  std::function<void(const torch::Tensor& residual, const torch::Tensor& output)> on_output;
  // Switch for benchmarks: false keeps the inference path's projections in separate GEMMs.
  bool fuse_projections = true;
  // The weights the inference path has derived from the projections' so far (the concatenated Q/K/V
  // and K/V matrices, the open heads' o_proj columns): for tests.
  std::vector<torch::Tensor> derived_weights() const;

 private:
  struct Fused {
    std::vector<std::pair<const void*, int64_t>> stamps;  // of the parts' weights and biases
    torch::Tensor weight, bias;                           // concatenated along the output dim
  };
  bool inference_path() const;
  bool fusion_pays() const;  // fused projection weights are a copy: only for layers of at most 16 MiB
  const Fused& fused(Fused& f, std::vector<const DenseImpl*> parts);
  bool all_unmasked();  // also refreshes open_heads_ when the mask changed
  torch::Tensor expand_kv(const torch::Tensor& t);  // [B, G, S, D] -> [B, H, S, D]
  // The steps of forward: the output of a layer whose heads are all removed; the projections (q, and
  // k and v unless the cache's are reused); the keys and values with the cache; the attention itself.
  torch::Tensor no_heads_forward(const torch::Tensor& query, const torch::Tensor& key_value, torch::Tensor* probs_out,
                                 const KVCache* cache, bool static_kv);
  void project(const torch::Tensor& query, const torch::Tensor& key_value, bool reuse_kv, torch::Tensor& q,
               torch::Tensor& k, torch::Tensor& v);
  static void use_cache(KVCache* cache, bool static_kv, bool reuse_kv, torch::Tensor& k, torch::Tensor& v);
  torch::Tensor bias_only(int64_t B, int64_t T, const torch::TensorOptions& options) const;
  torch::Tensor project_out(const torch::Tensor& ctx);  // o_proj of the context [B, H, T, D]
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& mask,
                       torch::Tensor* probs_out);
  torch::Tensor grouped_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& mask, torch::Tensor* probs_out);

  Fused qkv_, kv_, open_o_;  // open_o_: o_proj's columns of the open heads (bias unused)
  std::pair<const void*, int64_t> mask_stamp_{nullptr, -1};
  bool all_unmasked_ = true;
  torch::Tensor open_heads_;  // [k] positions whose mask entry is not 0
  HeadGeometry geometry_;
  torch::Tensor kv_index_;  // [H] key/value head position of each query head (grouped layers)
  int64_t even_group_ = 0;  // r when query head p reads key/value head p / r for every p (r > 1), else 0
  double attention_dropout_;
};
TORCH_MODULE(MultiHeadAttention);

}  // namespace hp
