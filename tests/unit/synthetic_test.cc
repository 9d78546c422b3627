// Built-in synthetic tasks: deterministic, well-formed, labels follow the stated rule.
#include <gtest/gtest.h>

#include "headprune/data/synthetic.h"

namespace hp {
namespace {

TEST(Synthetic, DeterministicFromSeed) {
  for (Arch a : {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder}) {
    auto cfg = tiny_config(a);
    auto x = synthetic_batch(cfg, 8, 3, 10, 42), y = synthetic_batch(cfg, 8, 3, 10, 42), z = synthetic_batch(cfg, 8, 3, 10, 43);
    EXPECT_TRUE(x.input_ids.equal(y.input_ids)) << to_string(a);
    EXPECT_TRUE(x.labels.equal(y.labels)) << to_string(a);
    EXPECT_FALSE(x.input_ids.sizes() == z.input_ids.sizes() && x.input_ids.equal(z.input_ids)) << to_string(a);
    EXPECT_TRUE(x.attention_mask.eq(x.input_ids.ne(kPadId)).all().item<bool>()) << to_string(a);
  }
}

TEST(Synthetic, ClassifierLabelIsTheMajorityResidueClass) {
  auto cfg = tiny_config(Arch::EncoderClassifier);
  auto b = synthetic_batch(cfg, 16, 4, 12, 1);
  for (int64_t i = 0; i < 16; ++i) {
    std::vector<int64_t> counts(cfg.n_classes, 0);
    for (int64_t j = 0; j < b.input_ids.size(1); ++j) {
      int64_t t = b.input_ids[i][j].item<int64_t>();
      if (t >= kFirstContentId) counts[t % cfg.n_classes]++;
    }
    EXPECT_EQ(b.labels[i].item<int64_t>(), std::max_element(counts.begin(), counts.end()) - counts.begin());
  }
}

TEST(Synthetic, LmLabelsAreNextTokensAndTranslationReverses) {
  auto lm = synthetic_batch(tiny_config(Arch::DecoderLM), 4, 3, 8, 2);
  auto ids = lm.input_ids, lab = lm.labels;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j + 1 < ids.size(1); ++j)
      if (lm.attention_mask[i][j + 1].item<int64_t>()) {
        EXPECT_EQ(lab[i][j].item<int64_t>(), ids[i][j + 1].item<int64_t>());
      }
  auto cfg = tiny_config(Arch::EncoderDecoder);
  auto mt = synthetic_batch(cfg, 4, 3, 8, 3);
  // decoder input = [bos] + labels[:-1]
  EXPECT_TRUE(mt.decoder_input_ids.select(1, 0).eq(kBosId).all().item<bool>());
  const int64_t len0 = mt.attention_mask[0].sum().item<int64_t>() - 1;  // without eos
  EXPECT_EQ(mt.labels[0][len0].item<int64_t>(), kEosId);
  EXPECT_THROW(synthetic_batch(cfg, 0, 3, 8, 1), std::invalid_argument);
  EXPECT_THROW(synthetic_batch(cfg, 2, 3, 100, 1), std::invalid_argument);
}

}  // namespace
}  // namespace hp
