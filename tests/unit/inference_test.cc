// The inference path (fused projections, skipped gate multiply), lower precision (bf16, dynamic
// int8) and the plain-LibTorch baseline of `bench --textbook`.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "headprune/eval/textbook.h"
#include "headprune/model/precision.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

using test::max_abs_diff;

torch::Tensor training_path(Transformer& m, const Batch& b) {
  torch::AutoGradMode grad(true);  // eval mode with gradients on: the path training and LRP use
  return m->forward(b).logits.detach();
}

torch::Tensor inference_path(Transformer& m, const Batch& b) {
  c10::InferenceMode guard;
  return m->forward(b).logits.clone();
}

class InferencePathFamilies : public ::testing::TestWithParam<test::Fam> {};

TEST_P(InferencePathFamilies, MatchesTheTrainingPathWithPaddingMaskedHeadsAndRemovedLayers) {
  auto m = test::make_model(GetParam());
  m->to(test::device());  // HP_TEST_DEVICE=cuda: the GPU's fused attention against the step-by-step path
  auto b = test::make_batch(m->config(), 3, 4);
  b.attention_mask.index_put_({0, torch::indexing::Slice(-2, torch::indexing::None)}, 0);  // padding
  b = b.to(test::device());
  EXPECT_LT(max_abs_diff(inference_path(m, b), training_path(m, b)), 1e-5);
  // A masked head: the gate multiply is back on the inference path.
  const auto t = m->config().attn_types().back();
  m->set_head_mask({t, 0, 1}, 0.0);
  auto masked = inference_path(m, b);
  EXPECT_LT(max_abs_diff(masked, training_path(m, b)), 1e-5);
  m->unmask_all();
  EXPECT_GT(max_abs_diff(inference_path(m, b), masked), 1e-6) << "the gate change must be seen";
  // Physically pruned, one attention layer emptied entirely.
  std::vector<HeadId> heads;
  for (int64_t h = 0; h < m->config().n_heads; ++h) heads.push_back({t, 0, h});
  heads.push_back({m->config().attn_types().front(), 1, 2});
  auto pruned = remove_heads(*m, heads);
  pruned->eval();
  ASSERT_EQ(pruned->parameters().front().device(), test::device());
  EXPECT_LT(max_abs_diff(inference_path(pruned, b), training_path(pruned, b)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(InferencePath, InferencePathFamilies,
                         HP_ALL_FAMILIES);

// Several threads, each with its own copy of a model, run forwards at once (as the Python module
// does with the GIL released): every result equals the lone run's bit for bit. The primitives and
// packed weights of util/gemm.cc are shared by all threads (issue 78: oneDNN's shared library
// scratchpad gave other threads' partial sums).
TEST_P(InferencePathFamilies, ConcurrentForwardsOfSeveralModelsEqualTheLoneRunsBitForBit) {
  auto cfg = test::config_of(GetParam());
  cfg.d_model = 256, cfg.d_ff = 1024, cfg.head_dim = 32, cfg.n_heads = 8;  // shapes oneDNN blocks and packs
  if (cfg.n_kv_heads > 0) cfg.n_kv_heads = 4;
  const int kThreads = 3, kRounds = 12;
  std::vector<Batch> batches;
  for (int64_t i = 0; i < 4; ++i) {
    auto b = test::make_batch(cfg, 20 + i, 1 + 3 * i);
    if (b.attention_mask.defined() && b.attention_mask.size(0) > 1)
      b.attention_mask.index_put_({1, torch::indexing::Slice(-2, torch::indexing::None)}, 0);
    batches.push_back(b);
  }
  std::vector<torch::Tensor> lone;
  {
    auto m = test::make_model(cfg, 5);
    for (const auto& b : batches) lone.push_back(inference_path(m, b));
  }
  std::vector<Transformer> models;
  for (int t = 0; t < kThreads; ++t) models.push_back(test::make_model(cfg, 5));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const size_t i = static_cast<size_t>(r + t) % batches.size();  // threads on different shapes at once
        if (!torch::equal(inference_path(models[t], batches[i]), lone[i])) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRounds << " concurrent forwards";
}

TEST(InferencePath, FusedWeightsFollowInPlaceChangesAndReloads) {
  auto m = test::make_model(Arch::EncoderDecoder);
  auto b = test::make_batch(m->config());
  auto before = inference_path(m, b);  // builds the fused Q/K/V and K/V weights
  {
    torch::NoGradGuard no_grad;  // as an optimizer step would
    m->attention(AttnType::EncoderSelf, 0).v_proj->weight.mul_(1.5);
    m->attention(AttnType::Cross, 1).k_proj->bias.add_(0.3);
  }
  auto after = inference_path(m, b);
  EXPECT_GT(max_abs_diff(after, before), 1e-4);
  EXPECT_LT(max_abs_diff(after, training_path(m, b)), 1e-5);
  // Training mode never uses the fused copies: gradients reach the projection weights.
  m->train();
  auto loss = m->forward(b).logits.pow(2).mean();
  loss.backward();
  EXPECT_TRUE(m->attention(AttnType::EncoderSelf, 0).q_proj->weight.grad().defined());
}

TEST(InferencePath, DerivedWeightsAreNormalTensorsEvenUnderInferenceMode) {
  // An inference tensor would be refused by the packed-weight cache (util/gemm.h) and send every
  // product with it to OpenBLAS unpacked: the fused Q/K/V and K/V matrices and the open heads'
  // o_proj columns are made as normal tensors, without gradients, whatever mode the forward runs in.
  for (Arch arch : {Arch::EncoderClassifier, Arch::EncoderDecoder}) {
    auto m = test::make_model(arch);
    auto b = test::make_batch(m->config());
    const auto types = m->config().attn_types();
    m->set_head_mask({types.front(), 0, 1}, 0.0);  // one masked head: its layer selects o_proj columns
    inference_path(m, b);
    size_t derived = 0, fused_qkv = 0, open_o = 0;
    for (const auto t : types)
      for (int64_t l = 0; l < m->config().n_layers(t); ++l) {
        auto& att = m->attention(t, l);
        for (const auto& w : att.derived_weights()) {
          ++derived;
          EXPECT_FALSE(w.is_inference()) << to_string(t) << " layer " << l;
          EXPECT_FALSE(w.requires_grad()) << to_string(t) << " layer " << l;
          const auto rows = w.size(0), C = att.o_proj->weight.size(0);
          if (rows == att.q_proj->weight.size(0) + att.k_proj->weight.size(0) + att.v_proj->weight.size(0)) ++fused_qkv;
          if (rows == C && w.size(1) < att.o_proj->weight.size(1)) ++open_o;
        }
      }
    EXPECT_GE(fused_qkv, 1u) << to_string(arch) << ": no fused Q/K/V matrix was built";
    EXPECT_EQ(open_o, 1u) << to_string(arch) << ": the masked layer's o_proj columns";
    EXPECT_GE(derived, fused_qkv + open_o);
  }
}

TEST(Precision, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(parse_precision("bf16"), Precision::BFloat16);
  EXPECT_EQ(parse_precision("int8"), Precision::Int8);
  EXPECT_EQ(to_string(parse_precision("fp32")), "fp32");
  try {
    parse_precision("fp8");
    FAIL() << "fp8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of: fp32, bf16, int8"), std::string::npos) << e.what();
  }
}

TEST(Precision, Int8LinearStaysWithinTheQuantizationError) {
  torch::manual_seed(3);
  auto w = torch::randn({48, 64}) * 0.1, bias = torch::randn({48}), x = torch::randn({5, 7, 64});
  auto ref = torch::linear(x, w, bias);
  auto y = int8::linear(x, int8::pack_linear(w, bias));
  ASSERT_EQ(y.sizes(), ref.sizes());
  // Weights off by at most half a step (max|w_row|/254) and activations by half of theirs: a few
  // tenths of a percent of the output scale, far below the output's own spread.
  const double err = max_abs_diff(y, ref), scale = ref.abs().max().item<double>();
  EXPECT_LT(err, 0.03 * scale);
  EXPECT_GT(err, 0.0) << "suspiciously exact: not quantized?";
}

TEST(Precision, Bf16AndInt8ModelsAgreeWithFp32AndCannotTrainOrConvertTwice) {
  for (Arch arch : {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder}) {
    auto ref = test::make_model(arch);
    auto b = test::make_batch(ref->config(), 5, 6);
    auto want = inference_path(ref, b);
    const double spread = want.std().item<double>();
    for (Precision p : {Precision::BFloat16, Precision::Int8}) {
      auto m = test::make_model(arch);  // same seed: same weights
      apply_precision(*m, p);
      auto got = inference_path(m, b).to(torch::kFloat);
      // Root-mean-square error a few percent of the logits' spread (measured 1-4 %; bf16 keeps 8
      // bits of mantissa, int8 7 bits of each weight row and of each activation batch). A broken
      // conversion (wrong layout, wrong scale) is off by about the spread itself.
      const double rms = (got - want).pow(2).mean().sqrt().item<double>();
      EXPECT_LT(rms, 0.1 * spread) << to_string(arch) << " " << to_string(p);
      EXPECT_GT(max_abs_diff(got, want), 0.0) << to_string(arch) << " " << to_string(p) << " unchanged";
      EXPECT_THROW(apply_precision(*m, Precision::Int8), std::logic_error);
    }
  }
  auto m = test::make_model(Arch::EncoderClassifier);
  apply_precision(*m, Precision::Int8);
  auto x = torch::randn({2, 3, m->config().d_model}, torch::requires_grad());
  EXPECT_THROW(m->encoder->layer(0).ffn->fc1->forward(x), std::logic_error);
}

TEST(Textbook, ComputesTheSameFunctionAsTheModel) {
  auto m = test::make_model(Arch::EncoderClassifier);
  auto b = test::make_batch(m->config(), 9, 5);
  b.attention_mask.index_put_({1, torch::indexing::Slice(-3, torch::indexing::None)}, 0);
  TextbookClassifier tb(*m);
  tb->eval();
  torch::NoGradGuard no_grad;
  auto want = m->forward(b).logits;
  EXPECT_LT(max_abs_diff(tb->forward(b), want), 1e-5);
  // Refuses what it does not model.
  auto pruned = remove_heads(*m, {{AttnType::EncoderSelf, 0, 1}});
  EXPECT_THROW(TextbookClassifier{*pruned}, std::invalid_argument);
  m->set_head_mask({AttnType::EncoderSelf, 1, 0}, 0.0);
  EXPECT_THROW(TextbookClassifier{*m}, std::invalid_argument);
  auto lm = test::make_model(Arch::DecoderLM);
  EXPECT_THROW(TextbookClassifier{*lm}, std::invalid_argument);
}

}  // namespace
}  // namespace hp
