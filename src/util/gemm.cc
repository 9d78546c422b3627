// fp32 linear layers through oneDNN's sgemm (see header).
#include "headprune/util/gemm.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#ifdef HP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace hp::gemm {

namespace {
Fp32Gemm from_environment() {
  const char* v = std::getenv("HP_FP32_GEMM");
  const std::string s = v ? v : "";
  if (s.empty()) return onednn_built() ? Fp32Gemm::Auto : Fp32Gemm::OpenBlas;
  if (s == "openblas") return Fp32Gemm::OpenBlas;
  if (s == "onednn" || s == "auto") {
    if (!onednn_built())
      throw std::invalid_argument("HP_FP32_GEMM=" + s + ": this headprune was built without oneDNN (install "
                                  "libdnnl-dev and rebuild), use openblas or leave the variable unset");
    return s == "auto" ? Fp32Gemm::Auto : Fp32Gemm::OneDnn;
  }
  throw std::invalid_argument("HP_FP32_GEMM: expected auto, openblas or onednn, got '" + s + "'");
}

std::atomic<int> g_choice{-1};  // -1: not read yet
}  // namespace

bool onednn_built() {
#ifdef HP_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

Fp32Gemm fp32_gemm() {
  int c = g_choice.load();
  if (c < 0) {
    c = static_cast<int>(from_environment());
    g_choice.store(c);
  }
  return static_cast<Fp32Gemm>(c);
}

bool uses_onednn(int64_t rows, int64_t inner) {
  switch (fp32_gemm()) {
    case Fp32Gemm::OneDnn: return true;
    case Fp32Gemm::OpenBlas: return false;
    case Fp32Gemm::Auto: return rows >= kOneDnnMinRows || inner <= kOneDnnMaxInner;
  }
  return false;
}

void set_fp32_gemm(Fp32Gemm g) {
  if (g != Fp32Gemm::OpenBlas && !onednn_built())
    throw std::invalid_argument("fp32 GEMM: this headprune was built without oneDNN");
  g_choice.store(static_cast<int>(g));
}

std::string describe() {
  const char* v = std::getenv("HP_FP32_GEMM");
  const std::string why = v && *v ? "HP_FP32_GEMM=" + std::string(v) : std::string("default");
  if (fp32_gemm() == Fp32Gemm::OneDnn) return "oneDNN sgemm for fp32 linear layers, forward and backward (" + why + ")";
  if (fp32_gemm() == Fp32Gemm::Auto)
    return "fp32 linear layers on oneDNN sgemm from " + std::to_string(kOneDnnMinRows) + " rows or at most " +
           std::to_string(kOneDnnMaxInner) + " inputs, else OpenBLAS (" + why + ")";
  return std::string("OpenBLAS for fp32 linear layers (") + why + (onednn_built() ? ")" : "; built without oneDNN)");
}

#ifdef HP_HAVE_DNNL
namespace {
// C[M, N] = op(A) op(B) (+ C when accumulate), row-major, through oneDNN.
void sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
           float* C, int64_t ldc, bool accumulate) {
  const auto status = dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
  if (status != dnnl_success)
    throw std::runtime_error("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") for [" +
                             std::to_string(M) + " x " + std::to_string(K) + "] x [" + std::to_string(K) + " x " +
                             std::to_string(N) + "]");
}

}  // namespace

at::Tensor onednn_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const auto xc = x.contiguous(), wc = w.contiguous();
  const int64_t K = w.size(1), N = w.size(0), M = K > 0 ? xc.numel() / K : 0;
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  auto out = at::empty(sizes, x.options());
  const bool bias = b.defined() && b.numel() > 0;
  if (M == 0 || N == 0) return out;
  if (K == 0) return bias ? out.copy_(b.expand(sizes)) : out.zero_();
  if (bias) out.view({M, N}).copy_(b.reshape({1, N}).expand({M, N}));  // C starts as the bias in every row
  sgemm('N', 'T', M, N, K, xc.data_ptr<float>(), K, wc.data_ptr<float>(), K, out.data_ptr<float>(), N, bias);
  return out;
}

namespace {

// Training: the same product with its backward through oneDNN too (dx = g W, dW = g^T x, db = sum g).
// A missing bias travels as an empty tensor (custom functions take defined tensors).
struct OneDnnLinear : public torch::autograd::Function<OneDnnLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b) {
    ctx->save_for_backward({x, w});
    return onednn_product(x, w, b);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const int64_t K = w.size(1), N = w.size(0);
    const auto g = grads[0].contiguous();
    const int64_t M = N > 0 ? g.numel() / N : 0;
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty(x.sizes(), x.options());
      if (M > 0 && K > 0) {
        if (N == 0) {
          dx.zero_();
        } else {
          const auto wc = w.contiguous();
          sgemm('N', 'N', M, K, N, g.data_ptr<float>(), N, wc.data_ptr<float>(), K, dx.data_ptr<float>(), K, false);
        }
      }
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty(w.sizes(), w.options());
      if (M > 0 && N > 0 && K > 0) {
        const auto xc = x.contiguous();
        sgemm('T', 'N', N, K, M, g.data_ptr<float>(), N, xc.data_ptr<float>(), K, dw.data_ptr<float>(), K, false);
      } else {
        dw.zero_();
      }
    }
    if (ctx->needs_input_grad(2)) db = g.reshape({M, N}).sum(0);
    return {dx, dw, db};
  }
};
}  // namespace
#else
at::Tensor onednn_product(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  throw std::invalid_argument("fp32 GEMM: this headprune was built without oneDNN");
}
#endif

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
#ifdef HP_HAVE_DNNL
  const bool fits = x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == at::kFloat &&
                    w.scalar_type() == at::kFloat && w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) &&
                    (!b.defined() || (b.device().is_cpu() && b.scalar_type() == at::kFloat && b.dim() == 1 &&
                                      b.numel() == w.size(0)));
  if (fits && w.size(1) > 0 && uses_onednn(x.numel() / w.size(1), w.size(1))) {
    const bool records_grad = c10::GradMode::is_enabled() &&
                              (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
    if (!records_grad) return onednn_product(x, w, b);
    return OneDnnLinear::apply(x, w, b.defined() ? b : at::empty({0}, w.options()));
  }
#endif
  return at::linear(x, w, b);
}

}  // namespace hp::gemm
