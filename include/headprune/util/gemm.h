// fp32 linear layers on the CPU: OpenBLAS (through torch::linear) or oneDNN's sgemm.
//
// Measured on this project's machine (docs/benchmarks.md, "Using the whole CPU"), oneDNN's sgemm is
// faster than OpenBLAS's best kernels at the shapes of a Transformer's linear layers, most at few
// rows (batch 1 x 32 tokens). So inference runs its fp32 linear layers through oneDNN when
// headprune was built with it (Debian's libdnnl-dev; the same libdnnl.so.2 LibTorch loads), unless
// HP_FP32_GEMM=openblas; in training, its backward too. Other dtypes and devices keep torch::linear.
#pragma once

#include <string>

#include <torch/types.h>

namespace hp::gemm {

enum class Fp32Gemm { OpenBlas, OneDnn };

bool onednn_built();  // headprune was built with oneDNN's headers (HP_HAVE_DNNL)
// The engine linear() uses for fp32 on the CPU: HP_FP32_GEMM (openblas | onednn) when set, else oneDNN
// when built with it. An unknown value or onednn without it is an error naming the variable.
Fp32Gemm fp32_gemm();
void set_fp32_gemm(Fp32Gemm g);  // for benchmarks and tests; throws if oneDNN is not built
std::string describe();          // one line for logs and benchmark environments

// x W^T + b (b may be undefined), x [..., K], W [N, K]. oneDNN's sgemm when selected and x, W are fp32
// CPU tensors, with a backward through oneDNN too when a gradient is recorded (first order only);
// torch::linear otherwise.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

}  // namespace hp::gemm
