// fp32 linear layers through oneDNN's sgemm (see header).
#include "headprune/util/gemm.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#ifdef HP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace hp::gemm {

namespace {
Fp32Gemm from_environment() {
  const char* v = std::getenv("HP_FP32_GEMM");
  const std::string s = v ? v : "";
  if (s.empty()) return onednn_built() ? Fp32Gemm::OneDnn : Fp32Gemm::OpenBlas;
  if (s == "openblas") return Fp32Gemm::OpenBlas;
  if (s == "onednn") {
    if (!onednn_built())
      throw std::invalid_argument("HP_FP32_GEMM=onednn: this headprune was built without oneDNN (install libdnnl-dev "
                                  "and rebuild), use openblas or leave the variable unset");
    return Fp32Gemm::OneDnn;
  }
  throw std::invalid_argument("HP_FP32_GEMM: expected openblas or onednn, got '" + s + "'");
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

void set_fp32_gemm(Fp32Gemm g) {
  if (g == Fp32Gemm::OneDnn && !onednn_built())
    throw std::invalid_argument("fp32 GEMM: this headprune was built without oneDNN");
  g_choice.store(static_cast<int>(g));
}

std::string describe() {
  const char* v = std::getenv("HP_FP32_GEMM");
  const std::string why = v && *v ? "HP_FP32_GEMM=" + std::string(v) : std::string("default");
  if (fp32_gemm() == Fp32Gemm::OneDnn) return "oneDNN sgemm for fp32 inference linear layers (" + why + ")";
  return std::string("OpenBLAS for fp32 linear layers (") + why + (onednn_built() ? ")" : "; built without oneDNN)");
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
#ifdef HP_HAVE_DNNL
  const bool records_grad = c10::GradMode::is_enabled() &&
                            (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
  const bool fits = x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == at::kFloat &&
                    w.scalar_type() == at::kFloat && w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) &&
                    (!b.defined() || (b.device().is_cpu() && b.scalar_type() == at::kFloat && b.numel() == w.size(0)));
  if (!records_grad && fits && fp32_gemm() == Fp32Gemm::OneDnn) {
    const auto xc = x.contiguous(), wc = w.contiguous();
    const int64_t K = w.size(1), N = w.size(0), M = K > 0 ? xc.numel() / K : 0;
    auto sizes = x.sizes().vec();
    sizes.back() = N;
    auto out = at::empty(sizes, x.options());
    if (M == 0 || N == 0) return out;
    if (K == 0) return b.defined() ? out.copy_(b.expand(sizes)) : out.zero_();
    float beta = 0.0f;
    if (b.defined()) {  // C starts as the bias in every row; the product is added to it
      out.view({M, N}).copy_(b.reshape({1, N}).expand({M, N}));
      beta = 1.0f;
    }
    const auto status = dnnl_sgemm('N', 'T', M, N, K, 1.0f, xc.data_ptr<float>(), K, wc.data_ptr<float>(), K, beta,
                                   out.data_ptr<float>(), N);
    if (status != dnnl_success)
      throw std::runtime_error("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") for [" +
                               std::to_string(M) + " x " + std::to_string(K) + "] x [" + std::to_string(K) + " x " +
                               std::to_string(N) + "]");
    return out;
  }
#endif
  return at::linear(x, w, b);
}

}  // namespace hp::gemm
