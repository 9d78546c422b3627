// fp32 linear layers on the CPU: OpenBLAS (through torch::linear) or oneDNN's sgemm.
//
// Measured on this project's machine (AMD EPYC Zen 5, 2 threads; docs/benchmarks.md, "Using the whole
// CPU"; bench/eager/gemm_engines.py), neither engine wins everywhere: oneDNN is 6-15 % faster at
// 2,048 rows and 15-23 % faster at every row count when the inner dimension is small (256), and up
// to 2.5x slower at few rows with a large inner dimension (32 x 3072 x 768), where OpenBLAS wins. So by default (`auto`) each product
// goes to oneDNN when it has at least kOneDnnMinRows rows or at most kOneDnnMaxInner inner
// dimension, to OpenBLAS otherwise; in training the backward of a product oneDNN ran forward runs on
// oneDNN too. HP_FP32_GEMM=openblas or =onednn forces one engine. oneDNN is there when headprune was
// built with its headers (Debian's libdnnl-dev; the library is the libdnnl.so.2 LibTorch loads).
// Other dtypes and devices keep torch::linear.
#pragma once

#include <string>

#include <torch/types.h>

namespace hp::gemm {

enum class Fp32Gemm { Auto, OpenBlas, OneDnn };
constexpr int64_t kOneDnnMinRows = 2048;  // auto: oneDNN from this many rows (x's rows, batch x length) on
constexpr int64_t kOneDnnMaxInner = 256;  // auto: ... or when the inner dimension (x's last) is at most this

bool onednn_built();  // headprune was built with oneDNN's headers (HP_HAVE_DNNL)
// The engine choice for fp32 on the CPU: HP_FP32_GEMM (auto | openblas | onednn) when set, else auto
// when built with oneDNN, openblas without. An unknown value, or auto/onednn without oneDNN, is an
// error naming the variable.
Fp32Gemm fp32_gemm();
void set_fp32_gemm(Fp32Gemm g);  // for benchmarks and tests; throws if oneDNN is not built
std::string describe();          // one line for logs and benchmark environments

// x W^T + b (b undefined or empty) on oneDNN's sgemm whatever the choice, without autograd: x [..., K]
// and W [N, K] fp32 CPU tensors. Throws if oneDNN is not built. For probes; layers call linear().
torch::Tensor onednn_product(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
// Whether a product with `rows` rows and inner dimension `inner` runs on oneDNN under the current choice.
bool uses_onednn(int64_t rows, int64_t inner);
// x W^T + b (b may be undefined), x [..., K], W [N, K]. oneDNN's sgemm when uses_onednn and x, W are
// fp32 CPU tensors, with a backward through oneDNN too when a gradient is recorded (first order
// only); torch::linear otherwise.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

}  // namespace hp::gemm
