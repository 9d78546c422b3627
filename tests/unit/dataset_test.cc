// Collation and token-count batching.
#include <gtest/gtest.h>

#include "headprune/data/dataset.h"
#include "headprune/data/synthetic.h"

namespace hp {
namespace {

TEST(Dataset, TokenBatchesRespectBudgetAndCoverEverything) {
  auto cfg = tiny_config(Arch::EncoderDecoder);
  auto ex = synthetic_examples(cfg, 200, 2, 40, 5);
  auto batches = make_token_batches(ex, 256, 16, true, 9);
  std::vector<int> seen(ex.size(), 0);
  for (const auto& b : batches) {
    int64_t longest = 0;
    for (size_t i : b) {
      longest = std::max(longest, example_length(ex[i]));
      seen[i]++;
    }
    EXPECT_LE(static_cast<int64_t>(b.size()), 16);
    EXPECT_TRUE(static_cast<int64_t>(b.size()) * longest <= 256 || b.size() == 1);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  // Deterministic for a seed, different for another.
  EXPECT_EQ(make_token_batches(ex, 256, 16, true, 9), batches);
  EXPECT_NE(make_token_batches(ex, 256, 16, true, 10), batches);
  // An example longer than the budget still gets a batch of its own.
  EXPECT_EQ(make_token_batches(ex, 3, 16, false, 0).size(), ex.size());
  EXPECT_THROW(make_token_batches(ex, 0, 16, false, 0), std::invalid_argument);
}

TEST(Dataset, CollateTranslationShiftsTarget) {
  Example e;
  e.src = {5, 6, 2};
  e.tgt = {1, 7, 8, 9, 2};
  Example f;
  f.src = {5, 2};
  f.tgt = {1, 7, 2};
  auto b = collate(std::vector<Example>{e, f}, Arch::EncoderDecoder, 0);
  EXPECT_TRUE(b.decoder_input_ids.equal(torch::tensor({{1, 7, 8, 9}, {1, 7, 0, 0}}).to(torch::kLong)));
  EXPECT_TRUE(b.labels.equal(torch::tensor({{7, 8, 9, 2}, {7, 2, -100, -100}}).to(torch::kLong)));
  EXPECT_TRUE(b.attention_mask.equal(torch::tensor({{1, 1, 1}, {1, 1, 0}}).to(torch::kLong)));
  EXPECT_EQ(count_target_tokens(b), 6);
  Example bad;
  bad.src = {3};
  bad.tgt = {1};
  EXPECT_THROW(collate(std::vector<Example>{bad}, Arch::EncoderDecoder, 0), std::invalid_argument);
}

}  // namespace
}  // namespace hp
