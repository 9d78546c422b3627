// Lower-precision inference for trained (and pruned) models: pruning composes with quantization.
//
//   fp32  the weights as trained;
//   bf16  every parameter and buffer converted to bfloat16 (oneDNN bf16 GEMM), logits in bf16;
//   int8  dynamic int8 linear layers: each Dense weight is quantized once, per output channel,
//         symmetric (scale = max |w| / 127), and activations are quantized per batch at run time
//         (LibTorch's quantized::linear_dynamic on the current quantized engine: oneDNN here, or
//         QNNPACK; there is no FBGEMM in this LibTorch). Embeddings, LayerNorm, attention scores and
//         a tied output projection stay in fp32.
// Conversions are one-way and for inference only: an int8 model cannot be trained (it throws if
// asked for gradients) and neither can be saved as a checkpoint of another precision. int8 runs on
// the CPU only (a model on another device is std::invalid_argument).
#pragma once

#include <string>

#include <ATen/core/ivalue.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "headprune/util/runtime.h"  // Precision

namespace hp {

class TransformerImpl;


// fp16 on the CPU ("f16 weights, f32 compute"): LibTorch 1.13 has no fp16 kernels on the CPU (matrix
// products, softmax, layer_norm, GELU, SiLU, tanh: "not implemented for 'Half'"), so a model whose
// weights are fp16 on the CPU (--dtype f16, or an F16-stored checkpoint under auto) computes in fp32
// from its fp16 values: every floating tensor is widened to fp32 once (exact: the weights stay the
// fp16-rounded values, so results are within fp16 weight rounding of the fp32 model; memory is fp32's).
// On a GPU fp16 stays fp16 (its kernels exist; masks hold fp16-safe values, model/transformer.h).
// Whether fp16 weights on `device` compute in fp32.
bool f16_computes_in_f32(const torch::Device& device);
// Widens a model whose floating parameters are fp16 on the CPU to fp32 (the rule above); returns
// whether it did. Any other model is left as it is.
bool widen_f16_on_cpu(TransformerImpl& model);
// A forward of fp16 weights on the CPU (a model converted by hand, not through loading) is
// std::invalid_argument naming the rule: load with dtype f16 instead, or widen_f16_on_cpu.
void check_computable(const torch::Tensor& weight);

// Converts the model in place (eval mode). fp32 is a no-op; a model already converted throws.
void apply_precision(TransformerImpl& model, Precision p);

// The quantized engine int8 layers run on ("onednn", "qnnpack", ...).
std::string quantized_engine_name();

namespace int8 {
// Packs weight [out, in] (fp32) and bias [out] (or undefined) for quantized::linear_dynamic.
c10::IValue pack_linear(const at::Tensor& weight, const at::Tensor& bias);
// x [.., in] fp32 -> [.., out] fp32.
at::Tensor linear(const at::Tensor& x, const c10::IValue& packed);
}  // namespace int8

}  // namespace hp
