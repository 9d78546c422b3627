// Multi-head attention with a gate per head and heterogeneous head counts.
//
// Dimension legend: B batch, T query length, S key length, C d_model, H heads kept in this
// layer (may be 0), D head dim.
// Parameters: q_proj/k_proj/v_proj weight [H*D, C] bias [H*D]; o_proj weight [C, H*D]
// bias [C] (stays whole under pruning); head_gate buffer [H] (ones = nothing masked).
// Head h's context is multiplied by head_gate[h] before o_proj, so gate 0 removes exactly
// its contribution and d loss / d head_gate is Michel et al.'s head importance signal.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "headprune/model/layers.h"

namespace hp {

// Keys/values of earlier decoding steps (self-attention) or of the encoder output (cross).
struct KVCache {
  torch::Tensor k, v;  // [B, H, S, D]
};

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  MultiHeadAttentionImpl(int64_t d_model, int64_t head_dim, std::vector<int64_t> kept_heads,
                         double attention_dropout);

  // query [B, T, C]; key_value [B, S, C] (the same tensor for self-attention);
  // mask additive, broadcastable to [B, H, T, S] (0 = attend, large negative = blocked),
  // or undefined. If probs_out is non-null it receives the attention probabilities
  // [B, H, T, S] (after masking, before dropout). Returns [B, T, C].
  // cache (optional): for self-attention new keys/values are appended; for cross-attention
  // (static_kv) keys/values are computed once and reused.
  // In eval mode without gradients (and outside LRP) the inference path runs: Q/K/V (or K/V) in
  // one GEMM with concatenated weights (rebuilt whenever a projection changes), and the gate
  // multiply skipped while every gate is 1. Results equal the training path up to rounding.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const torch::Tensor& mask, torch::Tensor* probs_out = nullptr,
                        KVCache* cache = nullptr, bool static_kv = false);

  int64_t n_heads() const { return static_cast<int64_t>(kept_heads_.size()); }
  int64_t head_dim() const { return head_dim_; }
  const std::vector<int64_t>& kept_heads() const { return kept_heads_; }
  // Position of an original head id in this layer, or -1 if it is not kept.
  int64_t position_of(int64_t original_head) const;

  Dense q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  torch::Tensor head_gate;  // [H]

  // Analysis hooks, unset in normal use (importance scoring sets and clears them):
  // gate_probe, broadcastable to [B, H, T, 1] (e.g. ones [B, H, 1, 1] with requires_grad), multiplies
  // the context after head_gate, so its gradient is the per-example (or per-token) d loss / d gate;
  // under lrp::Scope its gradient is the relevance of each head's output.
  torch::Tensor gate_probe;
  // Called with the gated context [B, H, T, D] of every forward pass.
  std::function<void(const torch::Tensor&)> on_context;
  // Switch for benchmarks: false keeps the inference path's projections in separate GEMMs.
  bool fuse_projections = true;

 private:
  struct Fused {
    std::vector<std::pair<const void*, int64_t>> stamps;  // of the parts' weights and biases
    torch::Tensor weight, bias;                           // concatenated along the output dim
  };
  bool inference_path() const;
  const Fused& fused(Fused& f, std::vector<const DenseImpl*> parts);
  bool gates_all_open();

  Fused qkv_, kv_;
  std::pair<const void*, int64_t> gate_stamp_{nullptr, -1};
  bool gates_all_open_ = true;
  int64_t d_model_, head_dim_;
  std::vector<int64_t> kept_heads_;
  double attention_dropout_;
};
TORCH_MODULE(MultiHeadAttention);

}  // namespace hp
