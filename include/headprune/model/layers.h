// Small building blocks whose registered names become checkpoint keys:
// Dense ("weight" [out, in], "bias" [out]) and Norm ("weight", "bias"; RMSNorm "weight" only).
// Dense calls torch::linear directly: on 3-D input it is fused and faster than nn::Linear.
// Both go through lrp:: so that relevance propagation (lrp.h) runs the same forward code.
// Dense can be switched to a dynamic int8 linear for inference (precision.h).
#pragma once

#include <functional>

#include <torch/torch.h>

#include "headprune/config.h"
#include "headprune/model/lrp.h"

namespace hp {

// While one is alive (on this thread), the modules being built allocate no weights: each parameter
// is a placeholder of its shape without storage of its own (one element, expanded) and is not
// initialized. For models that are loaded right after they are built (model/state.h puts the stored
// tensors in the placeholders' place): building a 7B model the ordinary way would allocate and
// initialize 28 GiB of fp32 first.
class DeferredInit {
 public:
  DeferredInit();
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;
  static bool active();
};
// A parameter of `shape`: the placeholder under DeferredInit, else `make()`.
torch::Tensor new_weight(at::IntArrayRef shape, const std::function<torch::Tensor()>& make);
// An embedding table of V x C (normal(0, 0.02) initialized, or a placeholder under DeferredInit).
torch::nn::Embedding new_embedding(int64_t V, int64_t C);

class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in, int64_t out, bool bias = true);
  torch::Tensor forward(const torch::Tensor& x) const;
  // activate(forward(x), a): in fp32 inference on the CPU one oneDNN product with the activation as
  // its epilogue (util/gemm.h), the same values within float rounding; otherwise exactly that.
  torch::Tensor forward_activated(const torch::Tensor& x, Activation a) const;
  torch::Tensor weight;  // [out, in]
  torch::Tensor bias;    // [out] or undefined
  // From now on forward runs an int8 copy of the current weights (inference only).
  void quantize_int8();
  bool quantized() const { return !int8_.isNone(); }

 private:
  c10::IValue int8_;  // packed int8 weights, or None
};
TORCH_MODULE(Dense);

class NormImpl : public torch::nn::Module {
 public:
  // LayerNorm ("weight", "bias") or RMSNorm ("weight" only: x / sqrt(mean(x^2) + eps) * weight,
  // its statistics in fp32 whatever the input's type, as HF's LlamaRMSNorm).
  NormImpl(int64_t dim, double eps, NormKind kind = NormKind::LayerNorm);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight, bias;  // bias undefined for RMSNorm

 private:
  double eps_;
  NormKind kind_;
};
TORCH_MODULE(Norm);

torch::Tensor activate(const torch::Tensor& x, Activation a);

// Position-wise feed-forward block: fc2(act(fc1(x))), or gated (SwiGLU and relatives):
// fc2(act(gate(x)) * fc1(x)). Biases on every projection unless `bias` is false.
class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t d_model, int64_t d_ff, Activation act, double dropout, bool gated = false, bool bias = true);
  torch::Tensor forward(const torch::Tensor& x);
  Dense fc1{nullptr}, fc2{nullptr}, gate{nullptr};  // gate only when gated

 private:
  Activation act_;
  double dropout_;
};
TORCH_MODULE(FeedForward);

}  // namespace hp
