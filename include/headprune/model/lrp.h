// Layer-wise relevance propagation (LRP) through the model's own forward code.
//
// While an lrp::Scope is alive on a thread, the few operations below build an autograd graph
// whose backward pass carries *relevance* instead of gradients (Voita et al. 2019, after Bach
// et al. 2015 and Ding et al. 2017): start backward with the relevance of the predicted logit
// (1 per prediction) and every tensor's ".grad" is its relevance. Outside a scope they are the
// plain operations, so the model has one forward implementation for both.
//
// Rules (z_ij = x_i * w_ji is input i's contribution to output j):
//   linear       alpha-beta rule: R_i = sum_j R_j (alpha z+_ij / (sum_i z+_ij + b+_j + eps)
//                + beta z-_ij / (sum_i z-_ij + b-_j - eps)); Voita's code uses alpha = beta = 0.5,
//                so positive and negative contributions both pass relevance and sum_i R_i = sum_j R_j
//                up to what the bias absorbs;
//   add          the same rule over the two summands (residual connections, embedding sums);
//   mix          attention: context = P V with the attention weights P held constant, so relevance
//                flows to the values only (queries and keys get none);
//   elementwise  LayerNorm, activations, scaling: relevance passes through unchanged;
//   probe        a head's context times a probe of ones: the probe's "gradient" is the relevance
//                reaching the head's output, summed over the head dimension.
// The rules are linear in the relevance, so one backward pass from every prediction of a batch
// gives the sum of the per-prediction relevances.
#pragma once

#include <torch/torch.h>

namespace hp::lrp {

struct Rules {
  double alpha = 0.5, beta = 0.5, eps = 1e-5;
};

// RAII switch for the current thread; scopes do not nest.
class Scope {
 public:
  explicit Scope(const Rules& rules = {});
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

bool active();

// x [.., in], w [out, in], b [out] or undefined.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
// a + b (same shape after broadcasting).
torch::Tensor add(const torch::Tensor& a, const torch::Tensor& b);
// y = f(x) for an element-wise or shape-preserving f; relevance of y goes to x unchanged.
torch::Tensor elementwise(const torch::Tensor& y, const torch::Tensor& x);
// probs [B, H, T, S] @ v [B, H, S, D].
torch::Tensor mix(const torch::Tensor& probs, const torch::Tensor& v);
// ctx [B, H, T, D] * probe (broadcastable, e.g. [B, H, T, 1]).
torch::Tensor probe(const torch::Tensor& ctx, const torch::Tensor& probe);

}  // namespace hp::lrp
