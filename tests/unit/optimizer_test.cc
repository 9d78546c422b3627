// Learning-rate schedules and AdamW (checked against LibTorch's own AdamW).
#include <gtest/gtest.h>

#include "headprune/train/optimizer.h"

namespace hp {
namespace {

TEST(Optimizer, Schedules) {
  EXPECT_DOUBLE_EQ(lr_at(1, 1.0, 4, 10, LrSchedule::Linear), 0.25);
  EXPECT_DOUBLE_EQ(lr_at(4, 1.0, 4, 10, LrSchedule::Linear), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(7, 1.0, 4, 10, LrSchedule::Linear), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(10, 1.0, 4, 10, LrSchedule::Linear), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(16, 1.0, 4, 100, LrSchedule::InverseSqrt), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(50, 2.0, 4, 100, LrSchedule::Constant), 2.0);
  EXPECT_DOUBLE_EQ(lr_at(3, 2.0, 0, 100, LrSchedule::Constant), 2.0);
  EXPECT_THROW(parse_lr_schedule("cosine"), std::invalid_argument);
}

TEST(Optimizer, AdamWMatchesLibTorch) {
  torch::manual_seed(0);
  auto w0 = torch::randn({5, 3});
  auto a = w0.clone().set_requires_grad(true), b = w0.clone().set_requires_grad(true);
  AdamWOptions o;
  o.weight_decay = 0.1;
  AdamW mine({{"layer.weight", a}}, o);
  torch::optim::AdamW ref({b}, torch::optim::AdamWOptions(0.01).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(0.1));
  for (int i = 0; i < 5; ++i) {
    auto x = torch::randn({3});
    (a.matmul(x).pow(2).sum()).backward();
    (b.matmul(x).pow(2).sum()).backward();
    mine.step(0.01);
    mine.zero_grad();
    ref.step();
    ref.zero_grad();
  }
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-6);
  EXPECT_GT((a - w0).abs().max().item<double>(), 1e-3);
  EXPECT_EQ(mine.steps(), 5);
}

TEST(Optimizer, StateRoundTripAndNoDecayOnBiasAndNorms) {
  auto w = torch::ones({2}).set_requires_grad(true), bias = torch::ones({2}).set_requires_grad(true);
  AdamWOptions o;
  o.weight_decay = 0.5;
  AdamW opt({{"fc.weight", w}, {"fc.bias", bias}}, o);
  w.mutable_grad() = torch::zeros({2});
  bias.mutable_grad() = torch::zeros({2});
  opt.step(0.1);  // zero gradient: only decay moves parameters
  EXPECT_NEAR(w[0].item<float>(), 0.95f, 1e-6);
  EXPECT_EQ(bias[0].item<float>(), 1.0f);
  auto st = opt.state();
  AdamW other({{"fc.weight", w}, {"fc.bias", bias}}, o);
  other.load_state(st, "mem");
  EXPECT_EQ(other.steps(), 1);
  st.erase("fc.bias.exp_avg");
  EXPECT_THROW(other.load_state(st, "mem"), std::runtime_error);
}

}  // namespace
}  // namespace hp
