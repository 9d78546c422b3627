// Physical head removal == gating to 0, for every family and attention type; repeated
// removal; empty layers; every head; bad requests.
#include <gtest/gtest.h>

#include "headprune/model/state.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

// Heads S for a family: in every attention type, two heads of layer 0 and all of layer 1.
std::vector<HeadId> heads_to_drop(const ModelConfig& cfg) {
  std::vector<HeadId> s;
  for (AttnType t : cfg.attn_types()) {
    s.push_back({t, 0, 1});
    s.push_back({t, 0, 3});
    for (int64_t h = 0; h < cfg.n_heads; ++h) s.push_back({t, 1, h});
  }
  return s;
}

class PruneEquivalence : public ::testing::TestWithParam<test::Fam> {};

TEST_P(PruneEquivalence, PrunedEqualsMaskedIncludingEmptyLayers) {
  auto model = test::make_model(GetParam());
  model->to(test::device());  // HP_TEST_DEVICE=cuda: masked = pruned on the GPU
  Batch b = test::make_batch(model->config()).to(test::device());
  const auto drop = heads_to_drop(model->config());
  auto pruned = remove_heads(*model, drop);
  torch::NoGradGuard g;
  auto full = model->forward(b).logits;
  model->mask_heads(drop);
  auto masked = model->forward(b, {true});
  auto phys = pruned->forward(b, {true});
  EXPECT_LE(test::max_abs_diff(masked.logits, phys.logits), 1e-5);
  EXPECT_GT(test::max_abs_diff(full, phys.logits), 1e-3) << "pruning changed nothing: test is vacuous";
  // Shapes and ids: layer 0 keeps heads {0, 2}, layer 1 none, in every attention type.
  const auto& pc = pruned->config();
  for (AttnType t : pc.attn_types()) {
    EXPECT_EQ(pc.heads(t)[0], (std::vector<int64_t>{0, 2})) << to_string(t);
    EXPECT_TRUE(pc.heads(t)[1].empty()) << to_string(t);
    auto& a0 = pruned->attention(t, 0);
    EXPECT_EQ(a0.q_proj->weight.size(0), 2 * pc.head_dim);
    EXPECT_EQ(a0.o_proj->weight.size(1), 2 * pc.head_dim);
    if (pc.o_bias) {
      EXPECT_EQ(a0.o_proj->bias.size(0), pc.d_model);
    }
    EXPECT_EQ(pruned->attention(t, 1).n_heads_kept(), 0);
    // Kept heads' attention maps are the masked model's maps of the same original heads.
    auto idx = torch::tensor({0, 2}).to(test::device());
    EXPECT_LE(test::max_abs_diff(masked.attention[t][0].index_select(1, idx), phys.attention[t][0]), 1e-5);
  }
  EXPECT_LT(pruned->n_parameters(), model->n_parameters());
}

// The inverse shape: back at every head count, removed heads zero, masks folded into o_proj; an
// unpruned model of the restored config computes what the pruned, masked one computes.
TEST_P(PruneEquivalence, RestoredShapesComputeThePrunedMaskedModel) {
  auto model = test::make_model(GetParam());
  Batch b = test::make_batch(model->config());
  auto pruned = remove_heads(*model, heads_to_drop(model->config()));
  const auto t = pruned->config().attn_types().front();
  pruned->set_head_mask({t, 0, 2}, 0.5);
  torch::NoGradGuard g;
  const auto want = pruned->forward(b).logits;
  auto [cfg, state] = restore_head_shapes(pruned->config(), state_dict(*pruned));
  for (AttnType a : cfg.attn_types())
    for (const auto& layer : cfg.heads(a)) EXPECT_EQ(static_cast<int64_t>(layer.size()), cfg.n_heads) << to_string(a);
  Transformer full(cfg);
  load_state_strict(*full, state, "restored");
  full->eval();
  EXPECT_TRUE(full->masked_heads().empty());
  EXPECT_LE(test::max_abs_diff(full->forward(b).logits, want), 1e-5);
  EXPECT_EQ(full->n_parameters(), model->n_parameters());
}

TEST_P(PruneEquivalence, RemovingTwiceEqualsRemovingOnce) {
  auto model = test::make_model(GetParam());
  Batch b = test::make_batch(model->config());
  const auto all = heads_to_drop(model->config());
  std::vector<HeadId> first(all.begin(), all.begin() + 3), second(all.begin() + 3, all.end());
  auto once = remove_heads(*model, all);
  auto p1 = remove_heads(*model, first);
  // After the first removal the remaining heads keep their original ids.
  auto p2 = remove_heads(*p1, second);
  EXPECT_EQ(p2->config().to_json(), once->config().to_json());
  torch::NoGradGuard g;
  EXPECT_LE(test::max_abs_diff(p2->forward(b).logits, once->forward(b).logits), 1e-5);
  // Removing a head that is already gone is an error naming it.
  try {
    remove_heads(*p2, {first.front()});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("already removed"), std::string::npos);
  }
}

TEST_P(PruneEquivalence, EveryHeadRemovedStillRuns) {
  auto model = test::make_model(GetParam());
  Batch b = test::make_batch(model->config());
  std::vector<HeadId> all;
  for (auto& g : model->head_masks())
    for (int64_t h : g.heads) all.push_back({g.type, g.layer, h});
  auto pruned = remove_heads(*model, all);
  torch::NoGradGuard g;
  model->mask_heads(all);
  auto y = pruned->forward(b, {true}).logits;
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  EXPECT_LE(test::max_abs_diff(model->forward(b).logits, y), 1e-5);
  for (AttnType t : pruned->config().attn_types()) EXPECT_EQ(pruned->config().n_heads_kept(t), 0);
}

INSTANTIATE_TEST_SUITE_P(Families, PruneEquivalence,
                         HP_ALL_FAMILIES);

TEST(RemoveHeads, KeepsGateValuesOfRemainingHeads) {
  auto model = test::make_model(Arch::EncoderClassifier);
  model->set_head_mask({AttnType::EncoderSelf, 0, 2}, 0.0);
  auto pruned = remove_heads(*model, {{AttnType::EncoderSelf, 0, 1}});
  EXPECT_EQ(pruned->masked_heads(), (std::vector<HeadId>{{AttnType::EncoderSelf, 0, 2}}));
}

TEST(RemoveHeads, BadRequestsAreClearErrors) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  auto expect_error = [&](const std::vector<HeadId>& heads, const std::string& needle) {
    try {
      validate_heads(cfg, heads);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{AttnType::Cross, 0, 0}}, "has no cross attention");
  expect_error({{AttnType::EncoderSelf, 2, 0}}, "layer 2 out of range");
  expect_error({{AttnType::EncoderSelf, -1, 0}}, "out of range");
  expect_error({{AttnType::EncoderSelf, 0, 4}}, "head id out of range");
  expect_error({{AttnType::EncoderSelf, 0, 1}, {AttnType::EncoderSelf, 0, 1}}, "listed twice");
  EXPECT_NO_THROW(validate_heads(cfg, {}));
}

TEST(RemoveHeads, PureFunctionLeavesInputsUntouched) {
  auto model = test::make_model(Arch::DecoderLM);
  auto state = state_dict(*model);
  auto before = state.at("decoder.layers.0.self_attn.q_proj.weight").clone();
  auto res = remove_heads(model->config(), state, {{AttnType::DecoderSelf, 0, 0}});
  EXPECT_EQ(state.at("decoder.layers.0.self_attn.q_proj.weight").size(0), 32);
  EXPECT_TRUE(state.at("decoder.layers.0.self_attn.q_proj.weight").equal(before));
  EXPECT_EQ(res.second.at("decoder.layers.0.self_attn.q_proj.weight").size(0), 24);
  EXPECT_EQ(res.first.decoder_self_heads[0], (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(model->config().decoder_self_heads[0].size(), 4u);
}

}  // namespace
}  // namespace hp
