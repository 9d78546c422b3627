// The building blocks of model/layers.h: deferred weight initialization, Dense (GEMM layer, int8,
// fused activation), Norm (LayerNorm / RMSNorm), the activations and the feed-forward block.
#include "headprune/model/layers.h"

#include "headprune/model/precision.h"
#include "headprune/util/gemm.h"
#include "headprune/util/interrupt.h"

namespace hp {

namespace {
thread_local int g_deferred = 0;
}  // namespace

DeferredInit::DeferredInit() { ++g_deferred; }
DeferredInit::~DeferredInit() { --g_deferred; }
bool DeferredInit::active() { return g_deferred > 0; }

torch::Tensor new_weight(at::IntArrayRef shape, const std::function<torch::Tensor()>& make) {
  if (DeferredInit::active()) return torch::zeros({1}).expand(shape);
  return make();
}

torch::nn::Embedding new_embedding(int64_t V, int64_t C) {
  if (DeferredInit::active()) return torch::nn::Embedding(torch::nn::EmbeddingOptions(V, C)._weight(new_weight({V, C}, {})));
  // As always built (its own initialization draws first): the same random numbers as before.
  torch::nn::Embedding e(V, C);
  torch::nn::init::normal_(e->weight, 0.0, 0.02);
  return e;
}

DenseImpl::DenseImpl(int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", new_weight({out, in}, [&] { return torch::empty({out, in}).normal_(0.0, 0.02); }));
  if (with_bias) bias = register_parameter("bias", new_weight({out}, [&] { return torch::zeros({out}); }));
}

torch::Tensor DenseImpl::forward(const torch::Tensor& x) const {
  if (quantized()) return int8::linear(x, int8_);
  if (!lrp::active()) return gemm::linear(x, weight, bias);  // oneDNN or OpenBLAS (util/gemm.h)
  return lrp::linear(x, weight, bias);
}

namespace {
// The model's activation as the GEMM layer's epilogue (one mapping for the fused and the unfused path).
gemm::Epilogue epilogue_of(Activation a) {
  switch (a) {
    case Activation::Gelu: return gemm::Epilogue::GeluErf;
    case Activation::GeluTanh: return gemm::Epilogue::GeluTanh;
    case Activation::Relu: return gemm::Epilogue::Relu;
    case Activation::Silu: return gemm::Epilogue::Silu;
  }
  return gemm::Epilogue::None;
}
}  // namespace

torch::Tensor DenseImpl::forward_activated(const torch::Tensor& x, Activation a) const {
  if (quantized() || lrp::active()) return activate(forward(x), a);
  return gemm::linear(x, weight, bias, epilogue_of(a));
}

void DenseImpl::quantize_int8() { int8_ = int8::pack_linear(weight, bias); }

NormImpl::NormImpl(int64_t dim, double eps, NormKind kind) : eps_(eps), kind_(kind) {
  weight = register_parameter("weight", new_weight({dim}, [&] { return torch::ones({dim}); }));
  if (kind_ == NormKind::LayerNorm) bias = register_parameter("bias", new_weight({dim}, [&] { return torch::zeros({dim}); }));
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) const {
  if (kind_ == NormKind::LayerNorm)
    return lrp::elementwise(torch::layer_norm(x, {weight.size(0)}, weight, bias, eps_), x);
  // Statistics in fp32 at least (bf16/fp16 models, as HF); a double model stays double.
  const auto xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  auto y = (xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_)).to(x.scalar_type()) * weight;
  return lrp::elementwise(y, x);
}

torch::Tensor activate(const torch::Tensor& x, Activation a) {
  return lrp::elementwise(gemm::apply_epilogue(x, epilogue_of(a)), x);
}

FeedForwardImpl::FeedForwardImpl(int64_t d_model, int64_t d_ff, Activation act, double dropout, bool gated, bool bias)
    : act_(act), dropout_(dropout) {
  fc1 = register_module("fc1", Dense(d_model, d_ff, bias));
  fc2 = register_module("fc2", Dense(d_ff, d_model, bias));
  if (gated) gate = register_module("gate", Dense(d_model, d_ff, bias));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  interruption_point();  // every path through a layer passes here or through attention (util/interrupt.h)
  torch::Tensor h;
  if (gate) {
    // LRP: the gate acts as a fixed multiplier, so relevance flows through fc1 (the "up" branch).
    const auto up = fc1(x);
    h = lrp::elementwise(gate->forward_activated(x, act_) * up, up);
  } else {
    h = fc1->forward_activated(x, act_);
  }
  h = torch::dropout(h, dropout_, is_training());
  return fc2(h);
}

}  // namespace hp
