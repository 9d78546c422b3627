// The three families: output shapes, padding and causal masks, attention maps, mask gradients.
#include <gtest/gtest.h>

#include "headprune/model/state.h"
#include "headprune/model/transformer.h"
#include "test_util.h"

namespace hp {
namespace {

using torch::indexing::Slice;

class Family : public ::testing::TestWithParam<test::Fam> {};

TEST_P(Family, OutputShapesAndAttentionMaps) {
  auto model = test::make_model(GetParam());
  const auto& cfg = model->config();
  Batch b = test::make_batch(cfg);
  torch::NoGradGuard g;
  auto out = model->forward(b, {true});
  const int64_t B = b.size(), T = b.input_ids.size(1);
  switch (cfg.arch) {
    case Arch::EncoderClassifier:
      EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{B, cfg.n_classes}));
      break;
    case Arch::DecoderLM:
      EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{B, T, cfg.vocab_size}));
      break;
    case Arch::EncoderDecoder:
      EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{B, b.decoder_input_ids.size(1), cfg.effective_tgt_vocab()}));
      break;
  }
  ASSERT_EQ(out.attention.size(), cfg.attn_types().size());
  for (AttnType t : cfg.attn_types()) {
    ASSERT_EQ(static_cast<int64_t>(out.attention[t].size()), cfg.n_layers(t));
    const auto& p = out.attention[t][0];
    const int64_t Tq = t == AttnType::EncoderSelf ? T : b.decoder_input_ids.defined() ? b.decoder_input_ids.size(1) : T;
    const int64_t S = t == AttnType::DecoderSelf ? Tq : T;
    EXPECT_EQ(p.sizes(), (std::vector<int64_t>{B, cfg.n_heads, Tq, S})) << to_string(t);
    EXPECT_LE(test::max_abs_diff(p.sum(-1), torch::ones({B, cfg.n_heads, Tq})), 1e-5);
  }
  EXPECT_TRUE(torch::isfinite(model->loss(out, b)).item<bool>());
  // Without the option, no maps are kept.
  EXPECT_TRUE(model->forward(b).attention.empty());
}

TEST_P(Family, PaddingDoesNotChangeRealPositions) {
  auto model = test::make_model(GetParam());
  const auto& cfg = model->config();
  Batch b = test::make_batch(cfg, 5, 1);
  // Append padding with garbage token ids (masked) to the encoder input and decoder input.
  Batch p = b;
  auto pad_more = [](const torch::Tensor& ids, const torch::Tensor& mask, torch::Tensor& out_ids,
                     torch::Tensor& out_mask) {
    out_ids = torch::cat({ids, torch::full({ids.size(0), 3}, 17, ids.options())}, 1);
    out_mask = torch::cat({mask, torch::zeros({mask.size(0), 3}, mask.options())}, 1);
  };
  pad_more(b.input_ids, b.attention_mask, p.input_ids, p.attention_mask);
  if (b.segment_ids.defined()) p.segment_ids = torch::cat({b.segment_ids, torch::zeros({1, 3}, torch::kLong)}, 1);
  if (b.decoder_input_ids.defined())
    pad_more(b.decoder_input_ids, b.decoder_attention_mask, p.decoder_input_ids, p.decoder_attention_mask);
  torch::NoGradGuard g;
  auto y0 = model->forward(b).logits, y1 = model->forward(p).logits;
  if (cfg.arch != Arch::EncoderClassifier) y1 = y1.narrow(1, 0, y0.size(1));
  EXPECT_LE(test::max_abs_diff(y0, y1), 1e-5);
}

TEST_P(Family, CausalDecoderIgnoresFutureTokens) {
  if (test::arch_of(GetParam()) == Arch::EncoderClassifier) GTEST_SKIP() << "no decoder";
  auto model = test::make_model(GetParam());
  Batch b = test::make_batch(model->config(), 3, 2);
  Batch c = b;
  auto& ids = test::arch_of(GetParam()) == Arch::DecoderLM ? c.input_ids : c.decoder_input_ids;
  ids = ids.clone();
  const int64_t U = ids.size(1), cut = U / 2;
  ids.index_put_({Slice(), Slice(cut, U)}, 5);
  torch::NoGradGuard g;
  auto y0 = model->forward(b).logits.narrow(1, 0, cut), y1 = model->forward(c).logits.narrow(1, 0, cut);
  EXPECT_LE(test::max_abs_diff(y0, y1), 1e-5);
  auto z0 = model->forward(b).logits.narrow(1, cut, U - cut), z1 = model->forward(c).logits.narrow(1, cut, U - cut);
  EXPECT_GT(test::max_abs_diff(z0, z1), 1e-4);  // later positions do see the change
}

INSTANTIATE_TEST_SUITE_P(Families, Family,
                         HP_ALL_FAMILIES);

TEST(Model, SegmentsChangeTheClassifierOutput) {
  auto model = test::make_model(Arch::EncoderClassifier);
  Batch b = test::make_batch(model->config(), 3, 2);
  Batch c = b;
  c.segment_ids = torch::ones_like(b.segment_ids);
  torch::NoGradGuard g;
  EXPECT_GT(test::max_abs_diff(model->forward(b).logits, model->forward(c).logits), 1e-4);
}

TEST(Model, ActivationDropoutIsTheFeedForwardsOwnSetting) {
  // Training mode, every other dropout 0: two passes differ only if the FFN activation is dropped.
  auto twice_differ = [](double activation_dropout) {
    auto cfg = tiny_config(Arch::EncoderClassifier);
    cfg.dropout = cfg.attention_dropout = 0.0;
    cfg.activation_dropout = activation_dropout;
    auto model = test::make_model(cfg);
    model->train();
    const Batch b = test::make_batch(cfg);
    return test::max_abs_diff(model->forward(b).logits, model->forward(b).logits);
  };
  EXPECT_GT(twice_differ(0.5), 1e-4);
  EXPECT_EQ(twice_differ(0.0), 0.0);
}

TEST(Model, MaskedHeadsStayMaskedInTraining) {
  // The training forward skips the multiplication by a mask of ones; a zero in it must still count.
  auto cfg = tiny_config(Arch::EncoderClassifier);
  cfg.dropout = cfg.attention_dropout = 0.0;
  auto model = test::make_model(cfg);
  model->train();
  const Batch b = test::make_batch(cfg);
  const auto all = model->forward(b).logits;
  model->mask_heads({{AttnType::EncoderSelf, 0, 1}});
  const auto masked_train = model->forward(b).logits;
  EXPECT_GT(test::max_abs_diff(all, masked_train), 1e-5);
  model->eval();
  torch::NoGradGuard g;
  EXPECT_LT(test::max_abs_diff(masked_train, model->forward(b).logits), 1e-6);
  model->unmask_all();
  EXPECT_LT(test::max_abs_diff(all, model->forward(b).logits), 1e-6);
}

TEST(Model, MaskingUnknownHeadsIsAClearError) {
  auto model = test::make_model(Arch::DecoderLM);
  try {
    model->set_head_mask({AttnType::EncoderSelf, 0, 0}, 0.0);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no encoder_self attention"), std::string::npos);
  }
  EXPECT_THROW(model->set_head_mask({AttnType::DecoderSelf, 2, 0}, 0.0), std::invalid_argument);
  EXPECT_THROW(model->set_head_mask({AttnType::DecoderSelf, 0, 4}, 0.0), std::invalid_argument);
  model->mask_heads({{AttnType::DecoderSelf, 1, 2}});
  ASSERT_EQ(model->masked_heads().size(), 1u);
  EXPECT_EQ(model->masked_heads()[0], (HeadId{AttnType::DecoderSelf, 1, 2}));
  model->unmask_all();
  EXPECT_TRUE(model->masked_heads().empty());
}

// d loss / d xi_h (the head mask) from one backward pass equals a central finite difference (float64).
class MaskGradient : public ::testing::TestWithParam<test::Fam> {};

TEST_P(MaskGradient, MatchesCentralFiniteDifference) {
  auto model = test::make_model(GetParam(), 21, torch::kDouble);
  Batch b = test::make_batch(model->config(), 4, 3);
  model->set_head_masks_requires_grad(true);
  model->loss(model->forward(b), b).backward();
  const double eps = 1e-6;
  int checked = 0;
  std::vector<torch::Tensor> grads;  // all masks at 1, taken before any probing
  for (auto& g : model->head_masks()) {
    ASSERT_TRUE(g.mask.grad().defined());
    grads.push_back(g.mask.grad().clone());
  }
  size_t gi = 0;
  for (auto& g : model->head_masks()) {
    auto grad = grads[gi++];
    for (size_t i = 0; i < g.heads.size(); ++i) {
      HeadId h{g.type, g.layer, g.heads[i]};
      torch::NoGradGuard ng;
      auto loss_at = [&](double v) {
        model->set_head_mask(h, v);
        return model->loss(model->forward(b), b).item<double>();
      };
      // Probe around a non-trivial mask value too, so the check is not only at 1.
      const double at = (i % 2 == 0) ? 1.0 : 0.5;
      double fd_at = (loss_at(at + eps) - loss_at(at - eps)) / (2 * eps);
      model->set_head_mask(h, 1.0);
      if (at == 1.0) {
        EXPECT_NEAR(grad[i].item<double>(), fd_at, 1e-6 + 1e-5 * std::abs(fd_at)) << to_string(h);
        ++checked;
      } else {
        // Recompute the analytic gradient with the mask at 0.5.
        model->set_head_mask(h, 0.5);
        for (auto& gg : model->head_masks()) gg.mask.mutable_grad() = torch::Tensor();
        {
          torch::AutoGradMode on(true);
          model->loss(model->forward(b), b).backward();
        }
        auto g2 = model->attention(g.type, g.layer).head_mask.grad()[i].item<double>();
        EXPECT_NEAR(g2, fd_at, 1e-6 + 1e-5 * std::abs(fd_at)) << to_string(h) << " at 0.5";
        model->set_head_mask(h, 1.0);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, model->config().n_heads * 2 * static_cast<int>(model->config().attn_types().size()));
}

INSTANTIATE_TEST_SUITE_P(Families, MaskGradient,
                         HP_ALL_FAMILIES);

}  // namespace
}  // namespace hp
