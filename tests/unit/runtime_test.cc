// The runtime: devices (a clear error for CUDA where there is none), random state for resume,
// autocast scopes, threads. CUDA cases skip themselves without a GPU.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>
#include <torch/cuda.h>

#include "headprune/util/blas.h"
#include "headprune/util/gemm.h"
#include "headprune/util/runtime.h"
#include "test_util.h"

namespace hp {
namespace {

TEST(Runtime, ParsesDevicesAndExplainsAMissingGpu) {
  EXPECT_EQ(parse_device("cpu"), torch::Device(torch::kCPU));
  for (const char* bad : {"tpu", "gpu0", ""}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
  if (torch::cuda::is_available()) {
    EXPECT_EQ(parse_device("cuda"), torch::Device(torch::kCUDA, 0));
    EXPECT_THROW(parse_device("cuda:" + std::to_string(torch::cuda::device_count())), std::invalid_argument);
    return;
  }
  try {
    parse_device("cuda:0");
    FAIL() << "cuda accepted without CUDA";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos) << e.what();
  }
}

TEST(Runtime, RandomStateRestoresTheSameDraws) {
  torch::manual_seed(5);
  torch::rand({3});
  const auto state = rng_state(torch::kCPU);
  const auto a = torch::rand({4});
  torch::rand({100});
  set_rng_state(state, torch::kCPU, "test");
  EXPECT_TRUE(torch::rand({4}).equal(a));
  EXPECT_THROW(set_rng_state({}, torch::kCPU, "test"), std::runtime_error);
}

TEST(Runtime, AutocastScopesNestAndRestore) {
  const auto x = torch::randn({4, 8}), w = torch::randn({3, 8});
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
  {
    Autocast outer(torch::kCPU, true);
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    {
      Autocast off(torch::kCPU, false);  // a scope without bf16 changes nothing
      EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    }
    {
      Autocast inner(torch::kCPU, true);
      EXPECT_TRUE(at::autocast::is_cpu_enabled());
    }
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat);
}

TEST(Runtime, AppliesThreadsAndSeed) {
  Runtime rt;
  rt.threads = 1;
  rt.seed = 9;
  EXPECT_EQ(apply_runtime(rt), 1);
  const auto a = torch::rand({2});
  apply_runtime(rt);
  EXPECT_TRUE(torch::rand({2}).equal(a));
  EXPECT_EQ(parse_precision("bf16"), Precision::BFloat16);
  EXPECT_EQ(to_string(Precision::Int8), "int8");
}

TEST(Gemm, BothEnginesComputeTorchLinear) {
  const auto before = gemm::fp32_gemm();
  std::vector<gemm::Fp32Gemm> engines{gemm::Fp32Gemm::OpenBlas};
  if (gemm::onednn_built()) {
    engines.push_back(gemm::Fp32Gemm::OneDnn);
    gemm::set_fp32_gemm(gemm::Fp32Gemm::Auto);
    EXPECT_TRUE(gemm::uses_onednn(gemm::kOneDnnMinRows, 3072));
    EXPECT_TRUE(gemm::uses_onednn(32, gemm::kOneDnnMaxInner));
    EXPECT_FALSE(gemm::uses_onednn(32, 3072));
  }
  torch::manual_seed(3);
  const auto w = torch::randn({40, 24}), b = torch::randn({40});
  const auto x3 = torch::randn({3, 7, 24});
  const auto strided = torch::randn({24, 5}).t();  // not contiguous
  for (auto e : engines) {
    gemm::set_fp32_gemm(e);
    torch::NoGradGuard g;
    for (const auto& x : {x3, strided, torch::randn({1, 24}), torch::randn({0, 24})}) {
      const auto want = torch::linear(x, w, b);
      const auto got = gemm::linear(x, w, b);
      ASSERT_EQ(got.sizes(), want.sizes());
      if (x.numel() == 0) continue;
      EXPECT_LT(test::max_abs_diff(got, want), 1e-4);
      EXPECT_LT(test::max_abs_diff(gemm::linear(x, w, {}), torch::linear(x, w)), 1e-4);
    }
    EXPECT_LT(test::max_abs_diff(gemm::linear(x3.to(torch::kDouble), w.to(torch::kDouble), b.to(torch::kDouble)),
                                 torch::linear(x3, w, b).to(torch::kDouble)), 1e-4);  // other dtypes: torch::linear
  }
  // Training: the gradients of x, W and b equal torch::linear's, with and without a bias.
  for (auto e : engines) {
    gemm::set_fp32_gemm(e);
    for (bool with_bias : {true, false}) {
      const auto g = torch::randn({3, 7, 40});
      auto grads = [&](bool ours) {
        auto x = x3.clone().requires_grad_(true), wg = w.clone().requires_grad_(true), bg = b.clone().requires_grad_(true);
        const auto bias = with_bias ? bg : torch::Tensor();
        auto y = ours ? gemm::linear(x, wg, bias) : torch::linear(x, wg, bias);
        EXPECT_TRUE(y.requires_grad());
        (y * g).sum().backward();
        return std::vector<torch::Tensor>{x.grad(), wg.grad(), with_bias ? bg.grad() : torch::zeros({40})};
      };
      const auto want = grads(false), got = grads(true);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(test::max_abs_diff(got[i], want[i]), 1e-3) << i << with_bias;
    }
  }
  gemm::set_fp32_gemm(before);
  EXPECT_NE(gemm::describe().find(before == gemm::Fp32Gemm::OpenBlas ? "OpenBLAS for" : "oneDNN"), std::string::npos);
}

TEST(Blas, RecommendsTheBestKernelsOfTheCpusLevelOnlyForWeakerCores) {
  EXPECT_EQ(recommended_blas_core("Prescott", "avx512"), "SkylakeX");  // the Xeon OpenBLAS 0.3.21 did not know
  EXPECT_EQ(recommended_blas_core("Nehalem", "avx2"), "Haswell");
  EXPECT_EQ(recommended_blas_core("Sandybridge", "avx512"), "SkylakeX");
  EXPECT_EQ(recommended_blas_core("Core2", "avx"), "Sandybridge");
  // A core at the CPU's level is OpenBLAS's own informed choice: kept.
  EXPECT_EQ(recommended_blas_core("Cooperlake", "avx512"), "");
  EXPECT_EQ(recommended_blas_core("Zen", "avx2"), "");
  EXPECT_EQ(recommended_blas_core("Haswell", "avx2"), "");
  // Never downwards, never for names or levels it does not know.
  EXPECT_EQ(recommended_blas_core("SkylakeX", "avx2"), "");
  EXPECT_EQ(recommended_blas_core("Power10", "avx512"), "");
  EXPECT_EQ(recommended_blas_core("Prescott", "unknown"), "");
}

TEST(Blas, InspectionNamesWhatRunsAndWhy) {
  const BlasKernels k = inspect_blas_kernels();
  ASSERT_TRUE(k.openblas) << "the tests link Debian's OpenBLAS";
  EXPECT_FALSE(k.loaded.empty());
  EXPECT_NE(k.reason.find(k.loaded), std::string::npos) << k.reason;
  if (const char* v = std::getenv("OPENBLAS_CORETYPE"); v && !std::getenv("HP_BLAS_CHOSEN_TO")) {
    EXPECT_EQ(k.user_setting, v);  // the user's setting is reported as theirs and never switched
    EXPECT_FALSE(k.should_switch());
  }
}

}  // namespace
}  // namespace hp
