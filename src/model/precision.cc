// Lower-precision inference (see header).
#include "headprune/model/precision.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>

#include <stdexcept>

#include "headprune/model/transformer.h"

namespace hp {

std::string quantized_engine_name() {
  switch (at::globalContext().qEngine()) {
    case at::QEngine::NoQEngine: return "none";
    case at::QEngine::FBGEMM: return "fbgemm";
    case at::QEngine::QNNPACK: return "qnnpack";
    case at::QEngine::ONEDNN: return "onednn";
    default: return "other";
  }
}

namespace int8 {

namespace {
const c10::OperatorHandle& prepack_op() {
  static const c10::OperatorHandle h = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
  return h;
}
const c10::OperatorHandle& linear_op() {
  static const c10::OperatorHandle h = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_dynamic", "");
  return h;
}
}  // namespace

c10::IValue pack_linear(const at::Tensor& weight, const at::Tensor& bias) {
  if (at::globalContext().qEngine() == at::QEngine::NoQEngine)
    throw std::runtime_error("int8: this LibTorch has no quantized engine");
  torch::NoGradGuard no_grad;
  auto w = weight.detach().to(torch::kFloat).contiguous();
  auto scales = (w.abs().amax(1).clamp_min(1e-8) / 127.0).to(torch::kDouble);
  auto zero = torch::zeros({w.size(0)}, torch::kLong);
  auto wq = torch::quantize_per_channel(w, scales, zero, 0, torch::kQInt8);
  c10::optional<at::Tensor> b;
  if (bias.defined()) b = bias.detach().to(torch::kFloat).contiguous();
  torch::jit::Stack stack{wq, b};
  prepack_op().callBoxed(&stack);
  return stack.at(0);
}

at::Tensor linear(const at::Tensor& x, const c10::IValue& packed) {
  if (torch::GradMode::is_enabled() && x.requires_grad())
    throw std::logic_error("int8 layers are for inference only (no gradients)");
  torch::jit::Stack stack{x.scalar_type() == torch::kFloat ? x : x.to(torch::kFloat), packed, false};
  linear_op().callBoxed(&stack);
  return stack.at(0).toTensor();
}

}  // namespace int8

void apply_precision(TransformerImpl& model, Precision p) {
  if (p == Precision::Float32) return;
  // A model loaded in bf16 (its stored dtype) is already what bf16 asks for.
  if (p == Precision::BFloat16 && model.parameters().front().scalar_type() == torch::kBFloat16) {
    model.eval();
    return;
  }
  bool converted = model.parameters().front().scalar_type() != torch::kFloat;
  for (auto& m : model.modules(false))
    if (auto* d = dynamic_cast<DenseImpl*>(m.get()); d && d->quantized()) converted = true;
  if (converted) throw std::logic_error("apply_precision: the model was already converted");
  if (p == Precision::Int8 && !model.parameters().front().device().is_cpu())
    throw std::invalid_argument("int8 inference runs on the CPU only (dynamic int8 linear layers); use --device cpu, "
                                "or bf16 on " + model.parameters().front().device().str());
  model.eval();
  if (p == Precision::BFloat16) {
    model.to(torch::kBFloat16);
    return;
  }
  for (auto& m : model.modules(false))
    if (auto* d = dynamic_cast<DenseImpl*>(m.get())) d->quantize_int8();
}

}  // namespace hp
