// Head geometry: the rows each head owns, grouped-query attention (several query heads per key/value
// head), layers without biases, removal by geometry, FLOP counts, and every reader of the geometry
// (magnitude scores, the HF tables and the textbook baseline refuse what they cannot express).
#include <gtest/gtest.h>

#include "headprune/eval/textbook.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/hf.h"
#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/state.h"
#include "headprune/score/importance.h"
#include "test_util.h"

namespace hp {
namespace {

// tiny_config with 2 key/value heads for 4 query heads and no biases in attention.
ModelConfig grouped_config(Arch arch, bool biases = false) {
  ModelConfig c = tiny_config(arch);
  c.n_kv_heads = 2;
  c.qkv_bias = biases;
  c.o_bias = biases;
  c.finalize();
  return c;
}
// The LLaMA family is grouped already (4 query heads over 2 key/value heads).
ModelConfig grouped_config(test::Fam fam, bool biases = false) {
  if (fam != test::Fam::Llama) return grouped_config(test::arch_of(fam), biases);
  ModelConfig c = test::config_of(fam);
  c.qkv_bias = c.o_bias = biases;
  c.finalize();
  return c;
}

TEST(Geometry, MultiHeadLayersOwnTheirOwnRows) {
  const auto g = HeadGeometry::mha(16, 4, {0, 2, 3});
  EXPECT_EQ(g.kv_heads(), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(g.kv_positions(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(g.q_width(), 12);
  EXPECT_EQ(g.kv_width(), 12);
  const auto cut = g.cut({2});
  EXPECT_EQ(cut.heads, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(cut.head_positions, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(cut.q_rows, (std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(cut.kv_rows, cut.q_rows);
  EXPECT_THROW(g.cut({1}), std::invalid_argument);
}

TEST(Geometry, GroupedLayersKeepAKeyValueHeadWhileOneOfItsQueryHeadsRemains) {
  HeadGeometry g = HeadGeometry::mha(16, 2, {0, 1, 2, 3, 4, 5});
  g.group_size = 3;  // query heads 0-2 read key/value head 0, 3-5 read head 1
  EXPECT_EQ(g.kv_heads(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g.kv_positions(), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(g.kv_width(), 4);
  auto partial = g.cut({1, 4});  // one query head of each group: both groups stay
  EXPECT_EQ(partial.heads, (std::vector<int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(partial.kv_rows, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(partial.q_rows, (std::vector<int64_t>{0, 1, 4, 5, 6, 7, 10, 11}));
  auto whole = g.cut({0, 1, 2});  // the first group entirely: its key/value rows go too
  EXPECT_EQ(whole.kv_rows, (std::vector<int64_t>{2, 3}));
  HeadGeometry after = g;
  after.heads = whole.heads;
  EXPECT_EQ(after.kv_heads(), (std::vector<int64_t>{1}));
  EXPECT_EQ(after.kv_positions(), (std::vector<int64_t>{0, 0, 0}));
}

TEST(Geometry, ConfigKeysAreValidatedAndRoundTrip) {
  const ModelConfig c = grouped_config(Arch::DecoderLM);
  const auto j = c.to_json();
  EXPECT_EQ(j.at("n_kv_heads").get<int64_t>(), 2);
  EXPECT_FALSE(j.at("qkv_bias").get<bool>());
  EXPECT_EQ(ModelConfig::from_json(j).to_json(), j);
  // Defaults are not written, so configs of multi-head models stay as they were.
  const auto plain = tiny_config(Arch::DecoderLM).to_json();
  EXPECT_FALSE(plain.contains("n_kv_heads") || plain.contains("qkv_bias") || plain.contains("o_bias"));
  ModelConfig bad = tiny_config(Arch::DecoderLM);
  bad.n_kv_heads = 3;
  try {
    bad.finalize();
    FAIL() << "3 key/value heads for 4 query heads accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_heads"), std::string::npos) << e.what();
  }
  const auto g = head_geometry(c, AttnType::DecoderSelf, 1);
  EXPECT_EQ(g.group_size, 2);
  EXPECT_FALSE(g.qkv_bias || g.o_bias);
}

TEST(Geometry, GroupedModelsHaveNarrowKeyValueProjectionsAndNoBiases) {
  auto model = test::make_model(grouped_config(Arch::EncoderDecoder));
  auto& a = model->attention(AttnType::Cross, 0);
  const int64_t D = model->config().head_dim;
  EXPECT_EQ(a.q_proj->weight.size(0), 4 * D);
  EXPECT_EQ(a.k_proj->weight.size(0), 2 * D);
  EXPECT_EQ(a.v_proj->weight.size(0), 2 * D);
  EXPECT_FALSE(a.q_proj->bias.defined() || a.k_proj->bias.defined() || a.o_proj->bias.defined());
}

// A grouped model computes what a multi-head model computes whose key/value heads are copies of the
// group's: the reference for grouped-query attention.
TEST(Geometry, GroupedAttentionEqualsMultiHeadWithSharedKeysAndValues) {
  for (Arch arch : {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder}) {
    auto grouped = test::make_model(grouped_config(arch, true));
    ModelConfig mc = grouped->config();
    mc.n_kv_heads = 0;
    mc.finalize();
    auto multi = test::make_model(mc);
    auto state = state_dict(*grouped);
    TensorMap expanded;
    for (const auto& [name, t] : state_dict(*multi)) {
      const bool kv = name.find(".k_proj.") != std::string::npos || name.find(".v_proj.") != std::string::npos;
      if (!kv) {
        expanded[name] = state.at(name);
        continue;
      }
      const auto& src = state.at(name);  // [2*D(, C)]: repeat each group's rows for its 2 query heads
      const int64_t D = mc.head_dim;
      auto rows = src.view({2, D, -1}).repeat_interleave(2, 0).reshape(t.sizes());
      expanded[name] = rows;
    }
    load_state_strict(*multi, expanded, "test");
    Batch b = test::make_batch(mc);
    torch::NoGradGuard g;
    EXPECT_LE(test::max_abs_diff(grouped->forward(b).logits, multi->forward(b).logits), 1e-5) << to_string(arch);
  }
}

class GroupedPruning : public ::testing::TestWithParam<test::Fam> {};

TEST_P(GroupedPruning, RemovedEqualsMaskedForPartialAndWholeGroups) {
  auto model = test::make_model(grouped_config(GetParam()));
  Batch b = test::make_batch(model->config());
  std::vector<HeadId> drop;
  for (AttnType t : model->config().attn_types()) {
    drop.push_back({t, 0, 1});  // one query head of group 0: the group stays
    drop.push_back({t, 1, 2});  // group 1 of layer 1 entirely
    drop.push_back({t, 1, 3});
  }
  auto pruned = remove_heads(*model, drop);
  torch::NoGradGuard g;
  const auto full = model->forward(b).logits;
  model->mask_heads(drop);
  EXPECT_LE(test::max_abs_diff(model->forward(b).logits, pruned->forward(b).logits), 1e-5);
  EXPECT_GT(test::max_abs_diff(full, pruned->forward(b).logits), 1e-4) << "pruning changed nothing";
  const int64_t D = model->config().head_dim;
  for (AttnType t : pruned->config().attn_types()) {
    auto& l0 = pruned->attention(t, 0);
    auto& l1 = pruned->attention(t, 1);
    EXPECT_EQ(l0.q_proj->weight.size(0), 3 * D);
    EXPECT_EQ(l0.k_proj->weight.size(0), 2 * D) << "a group with a query head left keeps its keys";
    EXPECT_EQ(l1.q_proj->weight.size(0), 2 * D);
    EXPECT_EQ(l1.k_proj->weight.size(0), 1 * D) << "an emptied group loses its keys";
    EXPECT_EQ(l1.geometry().kv_heads(), (std::vector<int64_t>{0}));
  }
  // Removing the rest of layer 0 and saving and loading again keeps the outputs.
  std::vector<HeadId> rest;
  for (AttnType t : pruned->config().attn_types())
    for (int64_t h : pruned->config().heads(t)[0]) rest.push_back({t, 0, h});
  auto empty = remove_heads(*pruned, rest);
  pruned->mask_heads(rest);
  EXPECT_LE(test::max_abs_diff(pruned->forward(b).logits, empty->forward(b).logits), 1e-5);
  test::TempDir dir;
  save_checkpoint(dir.path, *empty);
  auto loaded = load_checkpoint(dir.path);
  EXPECT_EQ(test::max_abs_diff(loaded->forward(b).logits, empty->forward(b).logits), 0.0);
}

TEST_P(GroupedPruning, InferencePathAndTrainingPathAgree) {
  auto model = test::make_model(grouped_config(GetParam(), true));
  model->set_head_mask({model->config().attn_types().back(), 1, 0}, 0.0);
  Batch b = test::make_batch(model->config());
  torch::Tensor with_grad;
  {
    torch::AutoGradMode on(true);
    with_grad = model->forward(b).logits.detach();
  }
  torch::NoGradGuard g;
  EXPECT_LE(test::max_abs_diff(model->forward(b).logits, with_grad), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, GroupedPruning,
                         HP_ALL_FAMILIES);

TEST(Geometry, FlopsCountKeyValueHeadsOnce) {
  // One layer, B=1, T=S=5, C=16, D=4: H query heads over G key/value heads.
  HeadGeometry g = HeadGeometry::mha(16, 4, {0, 1, 2, 3});
  const double mha = g.flops(1, 5, 5);
  EXPECT_DOUBLE_EQ(mha, 2 * 5 * 16 * 16 + 2 * 2 * 5 * 16 * 16 + 2 * 2 * 4 * 5 * 5 * 4 + 2 * 5 * 16 * 16);
  g.group_size = 2;
  EXPECT_DOUBLE_EQ(g.flops(1, 5, 5), mha - 2 * 2 * 5 * 16 * 8);  // half the key/value projections
  g.heads.clear();
  EXPECT_DOUBLE_EQ(g.flops(1, 5, 5), 0.0);
}

TEST(Geometry, MagnitudeGivesEachQueryHeadItsGroupsKeyAndValueNorms) {
  auto model = test::make_model(grouped_config(Arch::DecoderLM));
  const EvalSet no_data;     // (named, not `{}` temporaries: GCC 12 then warns of an uninitialized
  const ScoreOptions opts;   // vector inside the temporary ScoreOptions)
  const auto s = score_heads(*model, no_data, ScoreMethod::Magnitude, opts);
  auto& a = model->attention(AttnType::DecoderSelf, 0);
  const int64_t D = model->config().head_dim;
  const double k_group1 = a.k_proj->weight.slice(0, D, 2 * D).to(torch::kDouble).norm().item<double>();
  for (int64_t h : {2, 3}) EXPECT_NEAR(s.columns.at("k_norm").at({AttnType::DecoderSelf, 0, h}), k_group1, 1e-9);
  const double q3 = a.q_proj->weight.slice(0, 3 * D, 4 * D).to(torch::kDouble).norm().item<double>();
  EXPECT_NEAR(s.columns.at("q_norm").at({AttnType::DecoderSelf, 0, 3}), q3, 1e-9);
}

TEST(Geometry, ReadersThatCannotExpressAGroupedModelSaySo) {
  auto lm = test::make_model(grouped_config(Arch::DecoderLM, true));
  try {
    to_hf(*lm);
    FAIL() << "HF export of a grouped model";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the model's n_kv_heads (2) has no form"), std::string::npos) << e.what();
  }
  auto cls = test::make_model(grouped_config(Arch::EncoderClassifier, true));
  try {
    TextbookClassifier tb(*cls);
    FAIL() << "textbook baseline of a grouped model";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("grouped-query"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hp
