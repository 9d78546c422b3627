// MultiHeadAttention: head masks, zero-head layers, probabilities, masks.
#include <gtest/gtest.h>

#include "headprune/model/attention.h"
#include "headprune/model/transformer.h"
#include "test_util.h"

namespace hp {
namespace {

MultiHeadAttention make_attention(std::vector<int64_t> heads, uint64_t seed = 3) {
  torch::manual_seed(seed);
  MultiHeadAttention a(HeadGeometry::mha(16, 4, heads), 0.0);
  torch::NoGradGuard g;
  for (auto& p : a->parameters()) p.normal_(0, 0.3);
  a->eval();
  return a;
}

TEST(Attention, MaskZeroRemovesExactlyTheHeadsContribution) {
  auto a = make_attention({0, 1, 2, 3});
  auto x = torch::randn({2, 5, 16});
  // Reference: the output without head 2 = o_proj over the other heads' context columns.
  torch::NoGradGuard g;
  a->head_mask[2] = 0.0;
  auto gated = a->forward(x, x, {});
  auto b = make_attention({0, 1, 3});  // same seed, same init order -> rebuild by slicing
  auto rows = torch::cat({torch::arange(0, 8), torch::arange(12, 16)});
  b->q_proj->weight.copy_(a->q_proj->weight.index_select(0, rows));
  b->q_proj->bias.copy_(a->q_proj->bias.index_select(0, rows));
  b->k_proj->weight.copy_(a->k_proj->weight.index_select(0, rows));
  b->k_proj->bias.copy_(a->k_proj->bias.index_select(0, rows));
  b->v_proj->weight.copy_(a->v_proj->weight.index_select(0, rows));
  b->v_proj->bias.copy_(a->v_proj->bias.index_select(0, rows));
  b->o_proj->weight.copy_(a->o_proj->weight.index_select(1, rows));
  b->o_proj->bias.copy_(a->o_proj->bias);
  EXPECT_LE(test::max_abs_diff(gated, b->forward(x, x, {})), 1e-6);
  // And gating is not a no-op.
  a->head_mask[2] = 1.0;
  EXPECT_GT(test::max_abs_diff(gated, a->forward(x, x, {})), 1e-3);
}

TEST(Attention, AllGatesZeroLeavesOnlyOutputBias) {
  auto a = make_attention({0, 1, 2, 3});
  auto x = torch::randn({2, 5, 16});
  torch::NoGradGuard g;
  a->head_mask.zero_();
  auto y = a->forward(x, x, {});
  EXPECT_LE(test::max_abs_diff(y, a->o_proj->bias.expand({2, 5, 16})), 1e-7);
}

TEST(Attention, ZeroHeadLayerSkipsAttentionAndAddsBias) {
  auto a = make_attention({});
  EXPECT_EQ(a->n_heads_kept(), 0);
  EXPECT_EQ(a->q_proj->weight.size(0), 0);
  auto x = torch::randn({3, 4, 16});
  torch::Tensor probs;
  auto y = a->forward(x, x, {}, &probs);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_LE(test::max_abs_diff(y, a->o_proj->bias.expand({3, 4, 16})), 0.0);
  EXPECT_EQ(probs.sizes(), (std::vector<int64_t>{3, 0, 4, 4}));
}

TEST(Attention, ProbabilitiesAreReturnedAndRespectTheMask) {
  auto a = make_attention({0, 2});
  auto q = torch::randn({2, 3, 16}), kv = torch::randn({2, 5, 16});
  auto keep = torch::tensor({{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}});
  torch::Tensor probs;
  a->forward(q, kv, padding_mask(keep, torch::kFloat), &probs);
  ASSERT_EQ(probs.sizes(), (std::vector<int64_t>{2, 2, 3, 5}));
  EXPECT_LE(test::max_abs_diff(probs.sum(-1), torch::ones({2, 2, 3})), 1e-6);
  EXPECT_EQ(probs.index({0, torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(3, 5)})
                .abs().max().item<float>(), 0.0f);
  EXPECT_EQ(a->position_of(2), 1);
  EXPECT_EQ(a->position_of(1), -1);
}

TEST(Attention, IncrementalSelfAttentionWithCacheMatchesFullCausal) {
  auto a = make_attention({0, 1, 2, 3});
  auto x = torch::randn({2, 6, 16});
  auto full = a->forward(x, x, causal_mask(6, x.device(), torch::kFloat));
  KVCache cache;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < 6; ++t) {
    auto xt = x.narrow(1, t, 1);
    steps.push_back(a->forward(xt, xt, {}, nullptr, &cache, false));
  }
  EXPECT_LE(test::max_abs_diff(torch::cat(steps, 1), full), 1e-5);
}

}  // namespace
}  // namespace hp
