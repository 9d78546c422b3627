// Learned gates: the Hard Concrete distribution against Monte-Carlo estimates, the PASS and
// concentrator terms against hand-computed values, and joint training to an exact head count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>

#include <gtest/gtest.h>

#include "headprune/data/synthetic.h"
#include "headprune/prune/gates.h"
#include "headprune/util/log.h"
#include "test_util.h"

namespace hp {
namespace {

TEST(HardConcrete, SamplesLieInTheUnitIntervalWithExactZerosAndOnes) {
  torch::manual_seed(1);
  HardConcrete d;
  auto g = d.sample(torch::zeros({20000}));
  EXPECT_GE(g.min().item<double>(), 0.0);
  EXPECT_LE(g.max().item<double>(), 1.0);
  EXPECT_GT((g == 0).sum().item<int64_t>(), 1000);  // the stretch puts mass exactly on 0 and 1
  EXPECT_GT((g == 1).sum().item<int64_t>(), 1000);
  EXPECT_GT(((g > 0) & (g < 1)).sum().item<int64_t>(), 1000);
}

TEST(HardConcrete, ClosedFormsMatchMonteCarlo) {
  torch::manual_seed(2);
  for (double beta : {0.33, 2.0 / 3.0}) {
    HardConcrete d;
    d.beta = beta;
    for (double la : {-3.0, -0.5, 0.0, 1.0, 4.0}) {
      const int64_t n = 200000;
      auto g = d.sample(torch::full({n}, la));
      const auto lat = torch::full({1}, la);
      const double mc_open = (g != 0).to(torch::kDouble).mean().item<double>();
      const double mc_zero = (g == 0).to(torch::kDouble).mean().item<double>();
      const double mc_one = (g == 1).to(torch::kDouble).mean().item<double>();
      SCOPED_TRACE("beta " + std::to_string(beta) + " log alpha " + std::to_string(la));
      EXPECT_NEAR(d.p_open(lat).item<double>(), mc_open, 0.005);  // the expected L0
      EXPECT_NEAR(d.p_zero(lat).item<double>(), mc_zero, 0.005);
      EXPECT_NEAR(d.p_one(lat).item<double>(), mc_one, 0.005);
      EXPECT_NEAR(d.p_zero(lat).item<double>() + d.p_open(lat).item<double>(), 1.0, 1e-6);
    }
  }
}

TEST(HardConcrete, DeterministicGateAndGradient) {
  HardConcrete d;
  auto la = torch::tensor({-10.0, 0.0, 10.0});
  auto g = d.deterministic(la);
  EXPECT_EQ(g[0].item<double>(), 0.0);
  EXPECT_NEAR(g[1].item<double>(), 0.5, 1e-6);  // sigmoid(0) * 1.2 - 0.1
  EXPECT_EQ(g[2].item<double>(), 1.0);
  // The sample is differentiable in log alpha (where it is not clamped).
  torch::manual_seed(3);
  auto x = torch::zeros({1000}, torch::requires_grad());
  d.sample(x).sum().backward();
  EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
  HardConcrete bad;
  bad.l = 0.1;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
}

// ---- the options' JSON record: one table for the flags, gates.json's keys and the ranges (issue 80) ----

TEST(GateOptionsJson, RoundTripsEveryFieldUnderTheFlagsNames) {
  GateOptions g;
  g.method = GateMethod::Dsp;
  g.target_kept = 5;
  g.dist.beta = 0.5;
  g.dist.l = -0.2;
  g.dist.r = 1.3;
  g.coef = 0.25;
  g.hc_target = HcTarget::Quadratic;
  g.concentrator_adaptive = false;
  g.concentrator_weight = 3.5;
  g.period = 7;
  g.reopen = false;
  g.reopen_until = 0.5;
  g.max_extra_steps = 40;
  g.dsp_tau_start = 2.0;
  g.dsp_tau_end = 0.1;
  g.dsp_straight_through = true;
  g.distill_temperature = 2.5;
  g.coef_max = 50;
  g.confidence_examples = 12;
  g.shape = PlanShape::Uniform;
  g.complete_by_rank = true;
  const nlohmann::json j = g.to_json();
  // The keys are the flags' names: --temperature, --extra-steps, --straight-through, --dsp-tau-start/end.
  EXPECT_EQ(j.at("temperature"), 0.5);
  EXPECT_EQ(j.at("extra_steps"), 40);
  EXPECT_EQ(j.at("straight_through"), true);
  EXPECT_EQ(j.at("dsp_tau_start"), 2.0);
  EXPECT_EQ(j.at("dsp_tau_end"), 0.1);
  EXPECT_EQ(j.at("concentrator"), 3.5);
  EXPECT_EQ(j.at("stretch"), nlohmann::json({-0.2, 1.3}));
  for (const char* old : {"beta", "max_extra_steps", "dsp_straight_through", "dsp_tau"}) EXPECT_FALSE(j.contains(old)) << old;
  // Every option row with a flag is written under its key.
  for (const auto& f : gate_option_table().fields()) {
    if (f.option) {
      EXPECT_TRUE(j.contains(f.key)) << f.key;
    }
  }
  const GateOptions back = GateOptions::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.method, GateMethod::Dsp);
  EXPECT_EQ(back.target_kept, std::optional<int64_t>(5));
  EXPECT_EQ(back.dist.l, -0.2);
  EXPECT_EQ(back.max_extra_steps, 40);
  EXPECT_FALSE(back.concentrator_adaptive);
  EXPECT_EQ(back.shape, PlanShape::Uniform);
  // No target is written as null and read back as none.
  EXPECT_FALSE(GateOptions::from_json(GateOptions{}.to_json()).target_kept.has_value());
}

TEST(GateOptionsJson, ReadsTheOldNamesOfEarlierGatesJson) {
  // gates.json's "options" as written before the keys were the flags' names.
  const auto old = nlohmann::json::parse(R"({"method": "passconc", "target_kept": 6, "beta": 0.4, "stretch": [-0.1, 1.1],
      "coef": 0.1, "hc_target": "controller", "coef_growth": 2.0, "concentrator": "adaptive", "concentrator_margin": 2.0,
      "concentrator_max": 500.0, "concentrator_until": 0.75, "period": 100, "clip": 5.0, "reopen": true,
      "reopen_decay": 0.9, "reopen_until": 0.75, "gate_lr": 0.05, "init_log_alpha": 3.0, "max_extra_steps": 100,
      "complete_by_rank": false, "dsp_tau": [1.5, 0.2], "dsp_straight_through": true, "lagrangian_lr": 0.05,
      "cofi_warmup": 0.5, "distill_weight": 0.0, "distill_hidden_weight": 0.0, "distill_temperature": 1.0,
      "shape": "per-layer"})");
  const GateOptions g = GateOptions::from_json(old);
  EXPECT_EQ(g.dist.beta, 0.4);
  EXPECT_EQ(g.max_extra_steps, 100);
  EXPECT_EQ(g.dsp_tau_start, 1.5);
  EXPECT_EQ(g.dsp_tau_end, 0.2);
  EXPECT_TRUE(g.dsp_straight_through);
  EXPECT_EQ(g.target_kept, std::optional<int64_t>(6));
  // Written again, under the new names only.
  const auto j = g.to_json();
  EXPECT_EQ(j.at("temperature"), 0.4);
  EXPECT_EQ(j.at("extra_steps"), 100);
  EXPECT_FALSE(j.contains("beta"));
  // Unknown keys are still refused.
  EXPECT_NE(test::error_of([] { GateOptions::from_json({{"betta", 0.4}}); }).find("betta"), std::string::npos);
}

TEST(GateOptionsJson, ARangeErrorNamesTheField) {
  GateOptions g;
  g.target_kept = 4;
  g.gate_lr = -1;
  std::string e = test::error_of([&] { g.validate(8); });
  EXPECT_NE(e.find("gate_lr must be a number > 0, not -1"), std::string::npos) << e;
  g = GateOptions{};
  g.max_extra_steps = -3;
  e = test::error_of([&] { g.validate(8); });
  EXPECT_NE(e.find("extra_steps must be an integer >= 0, not -3"), std::string::npos) << e;
  // Read from JSON, under the key it was found under (an old name included).
  e = test::error_of([] { GateOptions::from_json({{"beta", 0}}); });
  EXPECT_NE(e.find("beta"), std::string::npos) << e;
  EXPECT_NE(e.find("must be a number > 0"), std::string::npos) << e;
  e = test::error_of([] { GateOptions::from_json({{"period", 0}}); });
  EXPECT_NE(e.find("period"), std::string::npos) << e;
  e = test::error_of([] { GateOptions::from_json({{"stretch", {0.1}}}); });
  EXPECT_NE(e.find("stretch"), std::string::npos) << e;
}

TEST(PassPenalty, MatchesHandComputedValues) {
  auto p0 = torch::tensor({0.9, 0.1, 0.5}), p1 = torch::tensor({0.05, 0.8, 0.3});
  // not binary 0.05 + 0.1 + 0.2 = 0.35; |1 - 1.5| = 0.5; |2 - 1.15| = 0.85.
  EXPECT_NEAR(pass_penalty(p0, p1, 1.0).item<double>(), 1.7, 1e-6);
  // Binary gates at exactly the target cost nothing.
  EXPECT_NEAR(pass_penalty(torch::tensor({1.0, 0.0, 0.0}), torch::tensor({0.0, 1.0, 1.0}), 1.0).item<double>(), 0.0,
              1e-9);
  // ... and one gate off target costs 2 (one too many closed, one too few open).
  EXPECT_NEAR(pass_penalty(torch::tensor({1.0, 1.0, 0.0}), torch::tensor({0.0, 0.0, 1.0}), 1.0).item<double>(), 2.0,
              1e-9);
}

TEST(PassPenalty, ConcentratorCountsLayersNotEntirelyClosed) {
  auto p0 = torch::tensor({1.0, 1.0, 0.5, 0.5, 0.5});
  EXPECT_NEAR(concentrator_penalty(p0, {2, 3}).item<double>(), 0.875, 1e-9);  // 0 + (1 - 0.125)
  EXPECT_NEAR(concentrator_penalty(torch::zeros({4}), {1, 3}).item<double>(), 2.0, 1e-9);
  EXPECT_THROW(concentrator_penalty(p0, {2, 2}), std::invalid_argument);
}

TEST(PassPenalty, AdaptiveConcentratorWeightMatchesHandComputedValues) {
  // Layers {2, 3}; heads 1, 2 and 3 open.
  auto p0 = torch::tensor({0.9, 0.2, 0.3, 0.4, 0.5}), p1 = torch::tensor({0.05, 0.6, 0.5, 0.4, 0.3});
  const std::vector<bool> open{false, true, true, true, false};
  // head 1: 2 * (0.24 / 0.16) / 0.9 = 3.333; head 2: 2 * (0.25 / 0.21) / (0.4 * 0.5) = 11.90;
  // head 3: 2 * max(1, 0.24 / 0.24) / (0.3 * 0.5) = 13.33. The smallest wins, under the cap.
  EXPECT_NEAR(concentrator_coefficient(p0, p1, open, {2, 3}, 2.0, 500.0), 10.0 / 3.0, 1e-5);
  EXPECT_NEAR(concentrator_coefficient(p0, p1, open, {2, 3}, 2.0, 3.0), 3.0, 1e-9);
  EXPECT_NEAR(concentrator_coefficient(p0, p1, {true, false, false, false, false}, {2, 3}, 1.0, 500.0),
              std::max(1.0, 0.05 * 0.95 / (0.9 * 0.1)) / 0.2, 1e-5);
  EXPECT_EQ(concentrator_coefficient(p0, p1, std::vector<bool>(5, false), {2, 3}, 2.0, 500.0), 500.0);
  EXPECT_THROW(concentrator_coefficient(p0, p1, open, {2, 2}, 2.0, 500.0), std::invalid_argument);
}

TEST(PassPenalty, AdaptiveConcentratorOutweighsTheOpeningPullByTheMargin) {
  // With the adaptive weight, the concentrator's gradient on the chosen open head's log alpha is
  // exactly margin x (the larger of the P(g=0) and P(g=1) slopes), so it beats the PASS term that
  // keeps the head open (slope dP1/dlog alpha) by the margin; on every other open head it is weaker.
  HardConcrete d;
  auto la = torch::tensor({-2.0, 1.5, 2.0, 3.0, -1.0, 4.0, 4.5}, torch::requires_grad());
  const std::vector<int64_t> sizes{2, 3, 2};
  std::vector<bool> open;
  for (int64_t i = 0; i < la.numel(); ++i) open.push_back(la[i].item<double>() >= 0);
  const double margin = 2.0;
  const double lc = concentrator_coefficient(d.p_zero(la), d.p_one(la), open, sizes, margin, 1e12);
  (lc * concentrator_penalty(d.p_zero(la), sizes)).backward();
  auto p0 = d.p_zero(la).detach(), p1 = d.p_one(la).detach();
  int equal = 0;
  for (int64_t i = 0; i < la.numel(); ++i) {
    if (!open[static_cast<size_t>(i)]) continue;
    const double g = la.grad()[i].item<double>();  // > 0: gradient descent lowers log alpha (closes)
    const double s0 = (p0[i] * (1 - p0[i])).item<double>(), s1 = (p1[i] * (1 - p1[i])).item<double>();
    EXPECT_GT(g, 0.0);
    EXPECT_LE(g, margin * std::max(s0, s1) * (1 + 1e-4)) << "head " << i;
    if (std::abs(g - margin * std::max(s0, s1)) < 1e-4 * margin * std::max(s0, s1)) ++equal;
  }
  EXPECT_EQ(equal, 1);
}

TEST(LambdaSearch, BisectsToAnExactCountAndRollsBackOnOvershoot) {
  // A count that jumps in clumps: 10 closed below λ = 0.3, 16 in [0.3, 0.31), 31 above.
  auto closed_at = [](double lambda) -> int64_t { return lambda < 0.3 ? 10 : (lambda < 0.31 ? 16 : 31); };
  LambdaSearch s{0.1, 2.0};
  int updates = 0;
  bool reached = false;
  while (updates < 30 && !reached) {
    const double lambda = s.lambda;
    const int64_t c = closed_at(lambda);
    const bool rollback = s.update(c, 16);
    EXPECT_EQ(rollback, c > 16) << "lambda " << lambda;
    if (c == 16) {
      reached = true;
      EXPECT_EQ(s.lambda, lambda);  // at the target λ stays
    }
    if (rollback) {
      EXPECT_LT(s.lambda, lambda);
    }
    if (c < 16) {
      EXPECT_GT(s.lambda, lambda);
    }
    ++updates;
  }
  EXPECT_TRUE(reached);
  EXPECT_LE(updates, 12);
  // A bound that went stale (overshooting at the λ that was last fine) searches lower again.
  LambdaSearch t{0.2, 2.0};
  EXPECT_FALSE(t.update(16, 16));
  EXPECT_TRUE(t.update(17, 16));
  EXPECT_NEAR(t.lambda, 0.1, 1e-12);
  // ... and so does a bracket bisected below growth^0.1 that still overshoots.
  LambdaSearch u{0.2, 2.0};
  u.update(10, 16);  // lo 0.2, λ 0.4
  int rollbacks = 0;
  while (u.lambda > 0.2 && rollbacks < 10) rollbacks += u.update(17, 16);
  EXPECT_EQ(rollbacks, 5);  // 0.4 -> 0.283 -> 0.238 -> 0.218 -> 0.209, then 0.209 / 2
  EXPECT_NEAR(u.lambda, 0.2 * std::pow(2.0, 1.0 / 16.0) / 2.0, 1e-9);
  EXPECT_EQ(u.lo, 0.0);
  // A stale upper bound (the gates now close too few even just below the λ that overshot) is
  // dropped the same way: after bisecting up to within growth^0.1 of hi, λ goes above it.
  LambdaSearch v{0.2, 2.0};
  EXPECT_TRUE(v.update(20, 16));  // hi 0.2, λ 0.1
  EXPECT_FALSE(v.update(10, 16));  // lo 0.1, λ 0.141
  int undershoots = 0;
  while (v.lambda < 0.2 && undershoots < 10) undershoots += !v.update(12, 16);
  EXPECT_EQ(undershoots, 4);  // 0.141 -> 0.168 -> 0.183 -> 0.191, then 0.191 * 2
  EXPECT_NEAR(v.lambda, 0.2 * std::pow(0.5, 1.0 / 16.0) * 2.0, 1e-9);
  EXPECT_EQ(v.hi, 0.0);
  // With hi gone, an overshoot above it bisects between the last good λ and the new hi.
  const double good = v.lo;
  EXPECT_TRUE(v.update(17, 16));
  EXPECT_NEAR(v.lambda, std::sqrt(good * 2.0 * good), 1e-12);
}

struct GateRun {
  GateTrainResult res;
  Transformer model{nullptr};
};

GateOptions tiny_gate_options(GateMethod method, int64_t target_kept) {
  GateOptions g;
  g.method = method;
  g.target_kept = target_kept;
  g.period = 20;
  g.gate_lr = 0.1;
  g.max_extra_steps = 400;
  g.confidence_examples = 16;
  return g;
}

GateRun train_gated(const ModelConfig& cfg, const GateOptions& g) {
  torch::manual_seed(0);
  GateRun r{{}, Transformer(cfg)};
  TrainData data{synthetic_examples(cfg, 512, 3, 10, 1), synthetic_examples(cfg, 64, 3, 10, 2)};
  TrainOptions t;
  t.max_steps = 200;
  t.batch_tokens = 256;
  t.lr = 2e-3;
  t.warmup_steps = 10;
  t.eval_every = 1000;
  t.log_every = 1000;
  t.seed = 5;
  test::TempDir dir;
  r.res = train_gates(r.model, data, t, g, dir.path);
  return r;
}

// fixed_concentrator: a fixed concentrator weight instead of the adaptive default.
GateRun train_tiny(GateMethod method, int64_t target_kept, int64_t layers = 2,
                   std::optional<double> fixed_concentrator = std::nullopt,
                   HcTarget hc_target = HcTarget::Controller, bool straight_through = false) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_encoder_layers = layers;
  cfg.encoder_self_heads.clear();
  cfg.n_classes = 2;
  cfg.finalize();
  GateOptions g = tiny_gate_options(method, target_kept);
  g.hc_target = hc_target;
  g.dsp_straight_through = straight_through;
  if (fixed_concentrator) {
    g.concentrator_adaptive = false;
    g.concentrator_weight = *fixed_concentrator;
  }
  return train_gated(cfg, g);
}

TEST(GateTraining, EachMethodReachesTheExactTarget) {
  set_log_level(LogLevel::Error);
  for (auto m : {GateMethod::HardConcrete, GateMethod::Pass, GateMethod::PassConc}) {
    SCOPED_TRACE(to_string(m));
    auto r = train_tiny(m, 3);
    EXPECT_TRUE(r.res.reached_target);
    EXPECT_EQ(r.res.kept.size(), 3u);
    EXPECT_EQ(r.res.closed.size() + r.res.kept.size(), 8u);
    EXPECT_FALSE(r.res.log.empty());
    EXPECT_EQ(r.res.log.back().p_open.size(), 8u);
    // Gates are detached afterwards; the model's own masks are untouched.
    EXPECT_TRUE(r.model->masked_heads().empty());
    for (const auto& g : r.model->head_masks()) EXPECT_FALSE(r.model->attention(g.type, g.layer).head_probe.defined());
  }
  set_log_level(LogLevel::Info);
}

TEST(GateTraining, HardConcreteQuadraticTargetPullsTheExpectedCount) {
  set_log_level(LogLevel::Error);
  // CoFi's quadratic term pulls the expected number of open gates to the target (it does not
  // promise binary gates, so the decided count is not asserted).
  auto r = train_tiny(GateMethod::HardConcrete, 3, 2, std::nullopt, HcTarget::Quadratic);
  EXPECT_NEAR(r.res.log.back().expected_open, 3.0, 1.0);
  EXPECT_EQ(r.res.log.front().coef <= r.res.log.back().coef, true);
  set_log_level(LogLevel::Info);
}

TEST(GateTraining, ConcentratorEmptiesWholeLayers) {
  set_log_level(LogLevel::Error);
  // 4 layers of 4 heads, keep 4: PASSCONC (adaptive concentrator) packs them into few layers.
  auto conc = train_tiny(GateMethod::PassConc, 4, 4);
  ASSERT_TRUE(conc.res.reached_target);
  EXPECT_GE(conc.res.emptied.size(), 2u);
  EXPECT_EQ(conc.res.emptied, emptied_layers(conc.model->config(), conc.res.closed));
  auto plain = train_tiny(GateMethod::Pass, 4, 4);
  ASSERT_TRUE(plain.res.reached_target);
  EXPECT_LT(plain.res.emptied.size(), conc.res.emptied.size());
  std::cout << "empty layers: pass " << plain.res.emptied.size() << " (" << plain.res.steps << " steps), passconc "
            << conc.res.emptied.size() << " (" << conc.res.steps << " steps)\n";
  set_log_level(LogLevel::Info);
}

TEST(SoftTopK, RelaxedMasksSumToKAndApproachTheHardTopK) {
  torch::manual_seed(3);
  const auto logits = torch::tensor({2.0, -1.0, 0.5, 1.5, -0.3, 0.0}, torch::kDouble);
  for (int64_t k : {1, 2, 4, 6}) {
    SCOPED_TRACE(k);
    for (double tau : {5.0, 1.0, 0.1}) {
      const auto m = soft_top_k(logits, k, tau);
      EXPECT_NEAR(m.sum().item<double>(), static_cast<double>(k), 1e-9);
      EXPECT_GE(m.min().item<double>(), 0.0);  // (an entry may pass 1 when warm: a relaxation, not a probability)
    }
    // Cold: the relaxation is the hard top-K (here {0, 3, 2, 5} in that order).
    EXPECT_LT((soft_top_k(logits, k, 0.01) - hard_top_k(logits, k)).abs().max().item<double>(), 1e-3);
  }
  EXPECT_TRUE(torch::equal(hard_top_k(logits, 2), torch::tensor({1.0, 0.0, 0.0, 1.0, 0.0, 0.0}, torch::kDouble)));
  EXPECT_TRUE(torch::equal(hard_top_k(torch::zeros({3}), 1), torch::tensor({1.0f, 0.0f, 0.0f})));  // ties: lower index
  EXPECT_THROW(soft_top_k(logits, 0, 1.0), std::invalid_argument);
  EXPECT_THROW(soft_top_k(logits, 7, 1.0), std::invalid_argument);
  EXPECT_THROW(soft_top_k(logits, 2, 0.0), std::invalid_argument);
}

TEST(SoftTopK, GumbelExpectedMaskSumsToKAndFollowsTheLogits) {
  torch::manual_seed(4);
  const auto logits = torch::tensor({2.0, -1.0, 0.5, 1.5, -0.3, 0.0}, torch::kDouble);
  const int64_t k = 3, n = 4000;
  auto mean = torch::zeros_like(logits), hard_mean = torch::zeros_like(logits);
  for (int64_t i = 0; i < n; ++i) {
    const auto m = gumbel_soft_top_k(logits, k, 0.5, false);
    ASSERT_NEAR(m.sum().item<double>(), 3.0, 1e-9);
    mean += m;
    const auto h = gumbel_soft_top_k(logits, k, 0.5, true);
    ASSERT_EQ(h.sum().item<double>(), 3.0);  // exactly K ones
    ASSERT_TRUE(torch::equal(h, h.round()));
    hard_mean += h;
  }
  mean /= static_cast<double>(n);
  hard_mean /= static_cast<double>(n);
  EXPECT_NEAR(mean.sum().item<double>(), 3.0, 1e-9);
  // Inclusion probabilities follow the logits: 2.0 > 1.5 > 0.5 > 0.0 > -0.3 > -1.0.
  for (const auto& m : {mean, hard_mean}) {
    auto a = m.accessor<double, 1>();
    EXPECT_GT(a[0], a[3]);
    EXPECT_GT(a[3], a[2]);
    EXPECT_GT(a[2], a[5]);
    EXPECT_GT(a[5], a[1]);
  }
  // Straight-through: the gradient is that of the relaxation.
  auto l = logits.clone().requires_grad_(true);
  torch::manual_seed(9);
  auto soft = gumbel_soft_top_k(l, k, 0.5, false);
  (soft * torch::arange(6, torch::kDouble)).sum().backward();
  const auto g_soft = l.grad().clone();
  l.mutable_grad().zero_();
  torch::manual_seed(9);
  (gumbel_soft_top_k(l, k, 0.5, true) * torch::arange(6, torch::kDouble)).sum().backward();
  EXPECT_TRUE(torch::allclose(l.grad(), g_soft));
  EXPECT_GT(g_soft.abs().sum().item<double>(), 0.0);
}

TEST(CofiGates, AClosedLayerGateEmptiesTheLayer) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_encoder_layers = 2;
  cfg.encoder_self_heads.clear();
  cfg.n_classes = 2;
  cfg.dropout = cfg.attention_dropout = 0.0;
  cfg.finalize();
  auto model = test::make_model(cfg, 2);
  model->eval();
  torch::NoGradGuard no_grad;
  TrainData data{synthetic_examples(cfg, 8, 3, 10, 1), {}};
  const Batch b = collate(data.train, cfg.arch, cfg.pad_id);
  HeadGateSet gates(*model, HardConcrete{}, 3.0, true);
  ASSERT_TRUE(gates.has_layer_gates());
  ASSERT_EQ(gates.layer_log_alpha().numel(), 2);
  EXPECT_EQ(gates.n_closed(), 0);
  const auto open = model->forward(b).logits;
  gates.attach_deterministic();  // every gate at 1
  EXPECT_LT((model->forward(b).logits - open).abs().max().item<double>(), 1e-6);
  gates.layer_log_alpha()[1] = -10.0;  // layer 1's gate closes
  gates.attach_deterministic();
  const auto gated = model->forward(b).logits;
  gates.detach();
  for (int64_t h = 0; h < cfg.n_heads; ++h) model->set_head_mask({AttnType::EncoderSelf, 1, h}, 0.0);
  EXPECT_LT((model->forward(b).logits - gated).abs().max().item<double>(), 1e-6);  // = every head of layer 1 masked
  EXPECT_GT((gated - open).abs().max().item<double>(), 1e-4);
  const auto closed = gates.closed();
  for (int64_t i = 0; i < gates.size(); ++i) EXPECT_EQ(closed[i], gates.heads()[i].layer == 1) << i;
  EXPECT_LT(gates.p_open().slice(0, cfg.n_heads).max().item<double>(), 1e-3);
}

// --shape uniform: every layer is trained to keep the same count, for every method that can be; 4 layers
// of 4 heads, 8 kept: 2 in every layer.
TEST(GateTraining, UniformShapeKeepsAsManyHeadsInEveryLayer) {
  set_log_level(LogLevel::Error);
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_encoder_layers = 4;
  cfg.encoder_self_heads.clear();
  cfg.n_classes = 2;
  cfg.finalize();
  for (auto m : {GateMethod::Dsp, GateMethod::Pass, GateMethod::Cofi, GateMethod::HardConcrete}) {
    SCOPED_TRACE(to_string(m));
    GateOptions g = tiny_gate_options(m, 8);
    g.shape = PlanShape::Uniform;
    g.hc_target = HcTarget::Quadratic;
    if (m == GateMethod::HardConcrete) g.max_extra_steps = 0;  // its quadratic term leaves gates non-binary: the cut decides
    const auto t0 = std::chrono::steady_clock::now();
    auto r = train_gated(cfg, g);
    std::cout << "uniform " << to_string(m) << ": " << r.res.steps << " steps, "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
    EXPECT_TRUE(r.res.reached_target);
    ASSERT_EQ(r.res.kept.size(), 8u);
    std::map<int64_t, int> per_layer;
    for (const auto& h : r.res.kept) ++per_layer[h.layer];
    EXPECT_EQ(per_layer, (std::map<int64_t, int>{{0, 2}, {1, 2}, {2, 2}, {3, 2}}));
    if (m == GateMethod::Pass) {
      // PASS met every layer's own count with its gates (the cut by P(open) then keeps what they kept).
      EXPECT_EQ(r.res.closed_by_gates, 8);
      const auto& last = r.res.log.back();
      for (size_t i = 0; i < r.res.heads.size(); ++i) {
        const bool kept = std::find(r.res.kept.begin(), r.res.kept.end(), r.res.heads[i]) != r.res.kept.end();
        EXPECT_EQ(kept, last.p_open[i] > 0.5) << i;
      }
    }
    if (m == GateMethod::Dsp) {
      // dsp's relaxation keeps 2 per layer throughout: the expected count is exactly 8, 2 in each layer.
      EXPECT_NEAR(r.res.log.back().expected_open, 8.0, 1e-4);
      for (int64_t l = 0; l < 4; ++l) {
        double open = 0;
        for (size_t i = 0; i < r.res.heads.size(); ++i)
          if (r.res.heads[i].layer == l) open += r.res.log.back().p_open[i];
        EXPECT_NEAR(open, 2.0, 1e-4) << l;
      }
    }
  }
  // Grouped-query attention (2 layers, 4 query heads in 2 key/value groups), 2 kept per layer: the same
  // shape in both layers, g groups of r heads.
  ModelConfig gqa = tiny_config(Arch::DecoderLM);
  gqa.n_decoder_layers = 2;
  gqa.n_kv_heads = 2;
  gqa.decoder_self_heads.clear();
  gqa.finalize();
  ASSERT_EQ(gqa.n_heads, 4);
  for (auto m : {GateMethod::Dsp, GateMethod::Pass}) {
    SCOPED_TRACE("gqa " + to_string(m));
    GateOptions g = tiny_gate_options(m, 4);
    g.shape = PlanShape::Uniform;
    auto r = train_gated(gqa, g);
    ASSERT_EQ(r.res.kept.size(), 4u);
    std::map<int64_t, std::map<int64_t, int>> groups;  // layer -> group -> kept heads
    for (const auto& h : r.res.kept) ++groups[h.layer][h.head / 2];
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].size(), groups[1].size());
    for (const auto& [l, gs] : groups)
      for (const auto& [k, n] : gs) EXPECT_EQ(n, groups[0].begin()->second) << l << ":" << k;
  }
  // What uniform cannot be: no target, passconc, hard_concrete's controller, a count no shape keeps.
  GateOptions g = tiny_gate_options(GateMethod::HardConcrete, 8);
  g.shape = PlanShape::Uniform;
  g.hc_target = HcTarget::Quadratic;
  g.target_kept.reset();
  EXPECT_NE(test::error_of([&] { train_gated(cfg, g); }).find("--shape uniform needs a target"), std::string::npos);
  g.target_kept = 8;
  g.hc_target = HcTarget::Controller;
  g.method = GateMethod::PassConc;
  EXPECT_NE(test::error_of([&] { train_gated(cfg, g); }).find("use --method pass"), std::string::npos);
  g.method = GateMethod::HardConcrete;
  EXPECT_NE(test::error_of([&] { train_gated(cfg, g); }).find("--hc-target quadratic"), std::string::npos);
  g.method = GateMethod::Dsp;
  g.target_kept = 7;
  EXPECT_NE(test::error_of([&] { train_gated(cfg, g); }).find("no uniform shape keeps exactly 7 heads; the nearest"),
            std::string::npos);
  set_log_level(LogLevel::Info);
}

TEST(GateTraining, DspAndCofiKeepExactlyK) {
  set_log_level(LogLevel::Error);
  for (auto m : {GateMethod::Dsp, GateMethod::Cofi}) {
    for (bool st : {false, true}) {
      if (m == GateMethod::Cofi && st) continue;
      SCOPED_TRACE(to_string(m) + (st ? " straight-through" : ""));
      auto r = train_tiny(m, 3, 2, std::nullopt, HcTarget::Controller, st);
      EXPECT_TRUE(r.res.reached_target);
      EXPECT_EQ(r.res.kept.size(), 3u);
      EXPECT_EQ(r.res.closed.size(), 5u);
      EXPECT_EQ(r.res.steps, 200);
      const auto& last = r.res.log.back();
      // The kept heads are the 3 largest logits (dsp) or P(open) (cofi) of the trained gates.
      std::vector<double> score = m == GateMethod::Dsp ? last.log_alpha : last.p_open;
      std::vector<double> sorted = score;
      std::sort(sorted.rbegin(), sorted.rend());
      for (size_t i = 0; i < r.res.heads.size(); ++i) {
        const bool kept = std::find(r.res.kept.begin(), r.res.kept.end(), r.res.heads[i]) != r.res.kept.end();
        EXPECT_EQ(kept, score[i] >= sorted[2]) << i;
      }
      EXPECT_GT(sorted.front() - sorted.back(), 1e-3);  // the gates trained apart
      if (m == GateMethod::Dsp) {
        EXPECT_NEAR(last.expected_open, 3.0, 1e-4);
        EXPECT_NEAR(last.coef, 0.05, 1e-9);  // the temperature, annealed to its end
      } else {
        EXPECT_NEAR(last.expected_open, 3.0, 1.5);  // the Lagrangian held the expected count near the target
        EXPECT_GT(last.conc_coef, 0.0);             // λ2 rose
        EXPECT_GE(r.res.closed_by_gates, 0);
      }
    }
  }
  set_log_level(LogLevel::Info);
}

// A target PASS misses (no penalty, 20 steps: the task loss alone moves the gates apart and none closes)
// is reported as missed, never ranked, unless complete_by_rank asks for the K heads with the largest
// P(open).
TEST(GateTraining, AMissedTargetIsCompletedByRankOnlyOnRequest) {
  set_log_level(LogLevel::Error);
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_classes = 2;
  cfg.finalize();
  TrainData data{synthetic_examples(cfg, 128, 3, 10, 1), synthetic_examples(cfg, 16, 3, 10, 2)};
  TrainOptions t;
  t.max_steps = 20;
  t.batch_tokens = 256;
  t.eval_every = 1000;
  t.log_every = 1000;
  t.seed = 5;
  GateOptions g;
  g.method = GateMethod::Pass;
  g.target_kept = 3;
  g.period = 10;
  g.coef = 0.0;
  for (bool complete : {false, true}) {
    SCOPED_TRACE(complete ? "completed by rank" : "default");
    g.complete_by_rank = complete;
    torch::manual_seed(0);
    Transformer model(cfg);
    test::TempDir dir;
    const auto r = train_gates(model, data, t, g, dir.path);
    const auto& last = r.log.back();
    ASSERT_LT(last.closed, static_cast<int64_t>(r.heads.size()) - 3) << "the gates reached the target: the test needs a miss";
    if (!complete) {
      EXPECT_FALSE(r.reached_target);
      EXPECT_EQ(static_cast<int64_t>(r.closed.size()), last.closed);
      EXPECT_EQ(r.closed_by_gates, -1);
      continue;
    }
    EXPECT_TRUE(r.reached_target);
    ASSERT_EQ(r.kept.size(), 3u);
    EXPECT_EQ(r.closed_by_gates, last.closed);
    EXPECT_EQ(r.to_json().at("closed_by_gates"), last.closed);
    // The top 3 by P(open) (Adam moves the gates in step, so ties are common: they go to the lower index).
    double kept_min = 2, closed_max = -1;
    size_t first_closed_tied = r.heads.size();
    for (size_t i = 0; i < r.heads.size(); ++i) {
      const bool kept = std::find(r.kept.begin(), r.kept.end(), r.heads[i]) != r.kept.end();
      if (kept) {
        kept_min = std::min(kept_min, last.p_open[i]);
      } else {
        closed_max = std::max(closed_max, last.p_open[i]);
      }
    }
    EXPECT_GE(kept_min, closed_max);
    for (size_t i = 0; i < r.heads.size(); ++i)
      if (last.p_open[i] == kept_min && std::find(r.kept.begin(), r.kept.end(), r.heads[i]) == r.kept.end())
        first_closed_tied = std::min(first_closed_tied, i);
    if (first_closed_tied < r.heads.size()) {
      for (size_t i = 0; i < r.heads.size(); ++i) {
        if (last.p_open[i] == kept_min && std::find(r.kept.begin(), r.kept.end(), r.heads[i]) != r.kept.end()) {
          EXPECT_LT(i, first_closed_tied) << "a tie went to a higher index";
        }
      }
    }
  }
  set_log_level(LogLevel::Info);
}

TEST(GateTraining, BadOptionsAreClearErrors) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_classes = 2;
  cfg.finalize();
  Transformer model(cfg);
  TrainData data{synthetic_examples(cfg, 16, 3, 6, 1), synthetic_examples(cfg, 8, 3, 6, 2)};
  test::TempDir dir;
  GateOptions g;
  g.method = GateMethod::Pass;  // no target
  EXPECT_THROW(train_gates(model, data, {}, g, dir.path), std::invalid_argument);
  g.target_kept = 0;
  try {
    train_gates(model, data, {}, g, dir.path);
    FAIL() << "keeping no head must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("prune every head"), std::string::npos) << e.what();
  }
  g.target_kept = 9;
  EXPECT_THROW(train_gates(model, data, {}, g, dir.path), std::invalid_argument);
  model->set_head_mask({AttnType::EncoderSelf, 0, 1}, 0.0);
  g.target_kept = 4;
  EXPECT_THROW(train_gates(model, data, {}, g, dir.path), std::invalid_argument);
  EXPECT_THROW(parse_gate_method("l1"), std::invalid_argument);
  EXPECT_THROW(parse_hc_target("linear"), std::invalid_argument);
  EXPECT_EQ(parse_hc_target("quadratic"), HcTarget::Quadratic);
  EXPECT_EQ(parse_gate_method("l0"), GateMethod::HardConcrete);
  EXPECT_EQ(parse_gate_method("dsp"), GateMethod::Dsp);
  EXPECT_EQ(parse_gate_method("cofi"), GateMethod::Cofi);
  g.target_kept.reset();
  model->unmask_all();
  for (auto m : {GateMethod::Dsp, GateMethod::Cofi}) {
    g.method = m;
    EXPECT_NE(test::error_of([&] { train_gates(model, data, {}, g, dir.path); }).find("needs a target"), std::string::npos);
  }
  g.target_kept = 4;
  g.cofi_warmup = 1.5;
  // A range error names the field as its flag and gates.json do (gate_option_table's check).
  EXPECT_NE(test::error_of([&] { train_gates(model, data, {}, g, dir.path); }).find("cofi_warmup must be a number in [0, 1], not 1.5"),
            std::string::npos);
}

}  // namespace
}  // namespace hp
