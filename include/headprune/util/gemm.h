// fp32 linear layers on the CPU: OpenBLAS (through torch::linear) or oneDNN.
//
// Inference (no gradient recorded): oneDNN's matmul primitive on weights reordered once into the
// layout its kernel reads (AVX-512 brgemm's blocked layout; CPUs without it keep W as it is) and
// kept while the weight tensor lives unchanged (keyed by the tensor, its data pointer and version
// counter). It costs as much memory again as the fp32 linear weights and, measured on this
// project's machine (docs/benchmarks.md, "Using the whole CPU"), runs a 32-row product at BERT-base
// widths at 2-2.5x OpenBLAS's and oneDNN sgemm's rate, because neither re-packs W on every call.
//
// Training: neither engine wins everywhere (oneDNN's sgemm is 6-15 % faster at 2,048 rows and
// 15-23 % faster at every row count when the inner dimension is small (256), and up to 2.5x slower
// at few rows with a large inner dimension (32 x 3072 x 768)). So by default (`auto`) each product
// goes to oneDNN's sgemm when it has at least kOneDnnMinRows rows or at most kOneDnnMaxInner inner
// dimension, to OpenBLAS otherwise, and its backward runs on the same engine.
// HP_FP32_GEMM=openblas runs everything on OpenBLAS (no packed copies); =onednn every product on
// oneDNN. oneDNN is there when headprune was built with its headers (Debian's libdnnl-dev; the
// library is the libdnnl.so.2 LibTorch loads). Other dtypes and devices keep torch::linear.
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
// An elementwise function applied to a product's output: by oneDNN inside the product (a post-op,
// while the output is still in cache) on the packed path, by ATen after it elsewhere.
enum class Epilogue { None, GeluErf, GeluTanh, Relu, Silu };
torch::Tensor apply_epilogue(const torch::Tensor& y, Epilogue e);  // ATen's function (torch::gelu, ...)

// x W^T + b (then `e`) on oneDNN's matmul with W packed once and cached (see above), without autograd;
// x fp32 CPU [..., K], W a contiguous fp32 CPU [N, K] that is not an inference tensor. Throws otherwise
// or if oneDNN is not built. linear() calls it for inference; exposed for benchmarks and tests.
torch::Tensor packed_product(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                             Epilogue e = Epilogue::None);
// Whether a training product with `rows` rows and inner dimension `inner` runs on oneDNN under the current choice.
bool uses_onednn(int64_t rows, int64_t inner);
// x W^T + b (b may be undefined), x [..., K], W [N, K]. For fp32 CPU tensors unless the choice is
// openblas: packed_product when no gradient is recorded, else oneDNN's sgemm when uses_onednn, with
// a backward through oneDNN too (first order only); torch::linear otherwise.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
// e(x W^T + b): one product with the function fused where linear() would take the packed path, else
// linear() and then apply_epilogue (the same values within float rounding: oneDNN's erf and tanh are
// its own).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, Epilogue e);

// Inference attention on oneDNN: softmax(scale q k^T + mask) v with q [B, H, T, D], k and v
// [B, H, S, D] fp32 CPU tensors read in place (any strides with unit stride along D, e.g. views
// into a fused Q/K/V product) and an additive fp32 mask broadcastable to [B, H, T, S] (undefined for
// none). Returns the context as [B, T, H * D], heads side by side as the output projection reads
// them, and the probabilities [B, H, T, S] in *probs when given. Without autograd. Returns an
// undefined tensor when it cannot run it well (the choice is openblas, built without oneDNN, other
// dtypes or layouts, or a shape only oneDNN's reference kernels take): the caller runs its own path.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double scale, torch::Tensor* probs);

}  // namespace hp::gemm
