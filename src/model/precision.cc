// Lower-precision inference (see header).
#include "headprune/model/precision.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>

#include <mutex>
#include <stdexcept>

#include "headprune/model/transformer.h"
#include "headprune/util/log.h"

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

c10::IValue pack_raw(const at::Tensor& weight, const at::Tensor& bias) {
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

at::Tensor linear_raw(const at::Tensor& x, const c10::IValue& packed) {
  torch::jit::Stack stack{x.scalar_type() == torch::kFloat ? x : x.to(torch::kFloat), packed, false};
  linear_op().callBoxed(&stack);
  return stack.at(0).toTensor();
}

// The largest error of an int8 product over its output's scale, on fixed values (no random state
// touched): per-channel weights and dynamic activations allow about 1 %.
double probe_error() {
  torch::NoGradGuard no_grad;
  auto w = torch::sin(torch::arange(48 * 64, torch::kFloat) * 0.37f).view({48, 64}) * 0.1f;
  auto b = torch::cos(torch::arange(48, torch::kFloat));
  auto x = torch::sin(torch::arange(35 * 64, torch::kFloat) * 1.3f + 0.5f).view({35, 64});
  auto ref = torch::linear(x, w, b);
  auto y = linear_raw(x, pack_raw(w, b));
  return (y - ref).abs().max().item<double>() / ref.abs().max().item<double>();
}

// LibTorch 1.13's oneDNN int8 kernels give wrong products on some CPUs (seen on an AMD EPYC with
// AVX-512 VNNI: errors of 10 % of the output where the quantization allows 1 %; QNNPACK is exact to
// the quantization there). The engine in use is checked once on a fixed product; when it is off, the
// first other engine that passes replaces it (logged), and with none an int8 layer is refused.
void ensure_sound_engine() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    if (at::globalContext().qEngine() == at::QEngine::NoQEngine) {
      failure = "int8: this LibTorch has no quantized engine";
      return;
    }
    constexpr double kTolerance = 0.03;
    const std::string first = quantized_engine_name();
    const double err = probe_error();
    if (err < kTolerance) return;
    for (auto engine : at::globalContext().supportedQEngines()) {
      if (engine == at::QEngine::NoQEngine || engine == at::globalContext().qEngine()) continue;
      at::globalContext().setQEngine(engine);
      if (probe_error() < kTolerance) {
        log_warn("int8", "the " + first + " quantized engine is off by " + std::to_string(err * 100) +
                             " % of the output on this CPU; using " + quantized_engine_name());
        return;
      }
    }
    failure = "int8: no quantized engine of this LibTorch computes correctly on this CPU (" + first + " is off by " +
              std::to_string(err * 100) + " % of the output); use fp32 or bf16";
  });
  if (!failure.empty()) throw std::runtime_error(failure);
}

}  // namespace

c10::IValue pack_linear(const at::Tensor& weight, const at::Tensor& bias) {
  ensure_sound_engine();
  return pack_raw(weight, bias);
}

at::Tensor linear(const at::Tensor& x, const c10::IValue& packed) {
  if (torch::GradMode::is_enabled() && x.requires_grad())
    throw std::logic_error("int8 layers are for inference only (no gradients)");
  return linear_raw(x, packed);
}

}  // namespace int8

bool f16_computes_in_f32(const torch::Device& device) { return device.is_cpu(); }

bool widen_f16_on_cpu(TransformerImpl& model) {
  const auto params = model.parameters();
  if (params.empty() || params.front().scalar_type() != torch::kHalf || !f16_computes_in_f32(params.front().device()))
    return false;
  torch::NoGradGuard no_grad;
  // set_data keeps each tensor (and its requires_grad) and swaps in the fp32 copy; a mapped file's
  // view is released here.
  for (auto& t : model.parameters(true))
    if (t.scalar_type() == torch::kHalf) t.set_data(t.detach().to(torch::kFloat));
  for (auto& t : model.buffers(true))
    if (t.scalar_type() == torch::kHalf) t.set_data(t.detach().to(torch::kFloat));
  log_info("dtype", "f16 weights on the CPU compute in fp32 (LibTorch has no fp16 CPU kernels): the fp16 values, "
                    "widened once");
  return true;
}

void check_computable(const torch::Tensor& weight) {
  if (weight.scalar_type() == torch::kHalf && f16_computes_in_f32(weight.device()))
    throw std::invalid_argument(
        "f16 weights on the CPU: LibTorch has no fp16 CPU kernels (matmul, softmax, layer_norm); load the model "
        "with dtype f16 (--dtype f16: the fp16 values computed in fp32) or widen it (widen_f16_on_cpu), or use bf16");
}

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
