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

#include "headprune/util/runtime.h"  // Precision

namespace hp {

class TransformerImpl;


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
