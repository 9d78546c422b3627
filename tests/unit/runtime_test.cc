// The runtime: devices (a clear error for CUDA where there is none), random state for resume,
// autocast scopes, threads. Cases marked so run on HP_TEST_DEVICE (tests/unit/test_util.h).
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "headprune/util/blas.h"
#include "headprune/util/gemm.h"
#include "headprune/util/runtime.h"
#include "headprune/util/torch_compat.h"
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
  const auto device = test::device();  // HP_TEST_DEVICE=cuda runs it on the GPU
  const auto type = device.type();
  const auto x = torch::randn({4, 8}).to(device), w = torch::randn({3, 8}).to(device);
  EXPECT_FALSE(compat::autocast_enabled(type));
  {
    Autocast outer(device, true);
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    {
      Autocast off(device, false);  // a scope without bf16 changes nothing
      EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    }
    {
      Autocast inner(device, true);
      EXPECT_TRUE(compat::autocast_enabled(type));
    }
    EXPECT_TRUE(compat::autocast_enabled(type));
  }
  EXPECT_FALSE(compat::autocast_enabled(type));
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat);
}

TEST(Runtime, AdamMomentsRollAnOptimizerBack) {
  const auto device = test::device();
  torch::manual_seed(5);
  auto p = torch::randn({6}, torch::TensorOptions().device(device).requires_grad(true));
  torch::optim::Adam opt(std::vector<torch::Tensor>{p}, torch::optim::AdamOptions(0.05));
  const auto target = torch::randn({6}).to(device);
  auto step = [&](double scale) {  // one Adam step on scale * |p - target|^2
    opt.zero_grad();
    (scale * (p - target).pow(2).sum()).backward();
    opt.step();
  };
  EXPECT_FALSE(compat::adam_moments(opt, p).exp_avg.defined());  // no step yet: no state
  for (int i = 0; i < 5; ++i) step(1.0);
  const auto saved_p = p.detach().clone();
  const auto saved = compat::adam_moments(opt, p);
  ASSERT_TRUE(saved.exp_avg.defined());
  EXPECT_EQ(saved.step, 5);
  step(1.0);
  const auto expected = p.detach().clone();  // where one more step goes from the snapshot
  for (int i = 0; i < 3; ++i) step(30.0);     // wander off, with much larger gradients
  {
    torch::NoGradGuard g;
    p.copy_(saved_p);
  }
  compat::set_adam_moments(opt, p, saved);
  EXPECT_EQ(compat::adam_moments(opt, p).step, 5);
  step(1.0);
  EXPECT_TRUE(torch::allclose(p.detach(), expected, 0, 1e-7)) << p << expected;
  // A fresh optimizer (the state cleared) takes a different first step: the moments matter.
  {
    torch::NoGradGuard g;
    p.copy_(saved_p);
  }
  compat::set_adam_moments(opt, p, {});
  EXPECT_FALSE(compat::adam_moments(opt, p).exp_avg.defined());
  step(1.0);
  EXPECT_FALSE(torch::allclose(p.detach(), expected, 0, 1e-4));
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

TEST(Gemm, PackedWeightsFollowTheTensorTheyCameFrom) {
  if (!gemm::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  torch::manual_seed(5);
  auto w = torch::randn({50, 37});  // widths that fill no kernel block exactly
  const auto b = torch::randn({50});
  torch::NoGradGuard g;
  for (int64_t rows : {1, 3, 32, 300}) {
    const auto x = torch::randn({rows, 37});
    EXPECT_LT(test::max_abs_diff(gemm::packed_product(x, w, b), torch::linear(x, w, b)), 1e-4) << rows;
    EXPECT_LT(test::max_abs_diff(gemm::packed_product(x, w, {}), torch::linear(x, w)), 1e-4) << rows;
  }
  const auto x = torch::randn({2, 9, 37});  // [..., K] keeps its leading dimensions
  EXPECT_EQ(gemm::packed_product(x, w, b).sizes(), (std::vector<int64_t>{2, 9, 50}));
  // An in-place write (an optimizer step, loading) is seen: the packed copy is made again.
  w.mul_(-2).add_(1);
  EXPECT_LT(test::max_abs_diff(gemm::packed_product(x, w, b), torch::linear(x, w, b)), 1e-4);
  w.copy_(torch::randn({50, 37}));
  EXPECT_LT(test::max_abs_diff(gemm::packed_product(x, w, b), torch::linear(x, w, b)), 1e-4);
  // A new tensor of the same shape, likely at the old one's address, is not mistaken for it.
  for (int i = 0; i < 3; ++i) {
    w = torch::randn({50, 37});
    EXPECT_LT(test::max_abs_diff(gemm::packed_product(x, w, b), torch::linear(x, w, b)), 1e-4) << i;
  }
  {
    c10::InferenceMode inference;  // inference inputs against a model's normal weights
    const auto xi = torch::randn({4, 37});
    EXPECT_LT(test::max_abs_diff(gemm::packed_product(xi, w, b), torch::linear(xi, w, b)), 1e-4);
  }
  EXPECT_NE(test::error_of([&] { gemm::packed_product(x, w.t(), {}); }).find("contiguous"), std::string::npos);
  EXPECT_NE(test::error_of([&] { gemm::packed_product(x.to(torch::kDouble), w, {}); }).find("fp32"),
            std::string::npos);
}

TEST(Gemm, FusedActivationsEqualTheProductThenATensFunction) {
  // Every epilogue, fused (packed path, inference) or not (autograd recording; the openblas choice):
  // ATen's function of torch::linear's product, within float rounding. Values around the functions'
  // bends (|y| up to ~10).
  torch::manual_seed(11);
  const auto w = torch::randn({96, 48}) * 0.5, b = torch::randn({96});
  const auto x = torch::randn({2, 17, 48});
  const auto before = gemm::fp32_gemm();
  std::vector<gemm::Fp32Gemm> engines{gemm::Fp32Gemm::OpenBlas};
  if (gemm::onednn_built()) engines.push_back(gemm::Fp32Gemm::Auto);
  for (auto engine : engines) {
    gemm::set_fp32_gemm(engine);
    for (auto e : {gemm::Epilogue::None, gemm::Epilogue::GeluErf, gemm::Epilogue::GeluTanh, gemm::Epilogue::Relu,
                   gemm::Epilogue::Silu}) {
      SCOPED_TRACE(static_cast<int>(e));
      const auto want = gemm::apply_epilogue(torch::linear(x, w, b), e);
      {
        torch::NoGradGuard g;
        const auto got = gemm::linear(x, w, b, e);
        ASSERT_EQ(got.sizes(), want.sizes());
        EXPECT_LT(test::max_abs_diff(got, want), 2e-5);
        EXPECT_LT(test::max_abs_diff(gemm::linear(x, w, {}, e), gemm::apply_epilogue(torch::linear(x, w), e)), 2e-5);
        if (engine == gemm::Fp32Gemm::Auto) {
          EXPECT_LT(test::max_abs_diff(gemm::packed_product(x, w, b, e), want), 2e-5);
        }
      }
      auto xg = x.clone().requires_grad_(true);
      const auto y = gemm::linear(xg, w, b, e);  // records: not fused, and differentiable
      EXPECT_TRUE(y.requires_grad());
      EXPECT_LT(test::max_abs_diff(y.detach(), want), 2e-5);
    }
  }
  gemm::set_fp32_gemm(before);
  EXPECT_GT(test::max_abs_diff(gemm::apply_epilogue(torch::linear(x, w, b), gemm::Epilogue::GeluErf),
                               gemm::apply_epilogue(torch::linear(x, w, b), gemm::Epilogue::GeluTanh)), 1e-4);
}

TEST(Gemm, OneDnnAttentionEqualsTheTextbookFormula) {
  if (!gemm::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  torch::manual_seed(6);
  const int64_t B = 2, T = 5, S = 7, H = 3, D = 4;
  torch::NoGradGuard g;
  auto reference = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& m,
                      double scale) {
    auto s = torch::matmul(q, k.transpose(-2, -1)) * scale;
    if (m.defined()) s = s + m;
    const auto p = torch::softmax(s, -1);
    return std::make_pair(torch::matmul(p, v).transpose(1, 2).reshape({q.size(0), q.size(2), -1}), p);
  };
  // q read from a fused projection [B, T, 3, H, D] (strided views), k and v contiguous.
  const auto qkv = torch::randn({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
  const auto k = torch::randn({B, H, S, D}), v = torch::randn({B, H, S, D});
  const auto pad = torch::zeros({B, 1, 1, S}).index_put_({1, 0, 0, torch::indexing::Slice(5)}, -1e9);
  const auto causal = torch::randn({1, 1, T, S});  // a shape oneDNN's fast kernels do not fuse: added by ATen
  for (const auto& mask : {torch::Tensor(), pad, causal, causal + pad, torch::randn({S})}) {
    for (const auto& [kk, vv] : {std::make_pair(k, v), std::make_pair(qkv[1].narrow(2, 0, T), qkv[2].narrow(2, 0, T))}) {
      const auto m = mask.defined() && kk.size(2) != S ? mask.narrow(-1, 0, T) : mask;
      torch::Tensor probs;
      const auto ctx = gemm::attention(qkv[0], kk, vv, m, 0.5, &probs);
      ASSERT_TRUE(ctx.defined());
      const auto want = reference(qkv[0], kk, vv, m, 0.5);
      EXPECT_EQ(ctx.sizes(), (std::vector<int64_t>{B, T, H * D}));
      EXPECT_LT(test::max_abs_diff(ctx, want.first), 1e-5);
      EXPECT_LT(test::max_abs_diff(probs, want.second), 1e-6);
    }
  }
  // What it does not take comes back undefined, for the caller's own path.
  EXPECT_FALSE(gemm::attention(qkv[0].to(torch::kDouble), k, v, {}, 1, nullptr).defined());
  EXPECT_FALSE(gemm::attention(qkv[0], k, v, torch::randn({3, 1, 1, S}), 1, nullptr).defined());  // batch 3 of 2
  EXPECT_FALSE(gemm::attention(qkv[0], k.transpose(2, 3), v, {}, 1, nullptr).defined());
  const auto before = gemm::fp32_gemm();
  gemm::set_fp32_gemm(gemm::Fp32Gemm::OpenBlas);
  EXPECT_FALSE(gemm::attention(qkv[0], k, v, {}, 1, nullptr).defined());
  gemm::set_fp32_gemm(before);
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
