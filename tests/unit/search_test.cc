// Decoding: cached greedy equals naive full-recompute greedy; beams are well-formed.
#include <gtest/gtest.h>

#include "headprune/decode/search.h"
#include "test_util.h"

namespace hp {
namespace {

// Greedy decoding by re-running the full model on the growing prefix (no cache).
std::vector<int64_t> naive_greedy(TransformerImpl& m, const Batch& one, int64_t max_len) {
  torch::NoGradGuard g;
  std::vector<int64_t> out = {1};
  for (int64_t t = 0; t < max_len; ++t) {
    Batch b = one;
    if (m.config().arch == Arch::EncoderDecoder) {
      b.decoder_input_ids = torch::tensor(out, torch::kLong).unsqueeze(0);
      b.decoder_attention_mask = torch::ones_like(b.decoder_input_ids);
    }
    auto logits = m.forward(b).logits;
    int64_t tok = logits[0][-1].argmax().item<int64_t>();
    if (tok == 2) break;
    out.push_back(tok);
  }
  return std::vector<int64_t>(out.begin() + 1, out.end());
}

TEST(Search, CachedGreedyTranslationEqualsNaiveGreedy) {
  auto model = test::make_model(Arch::EncoderDecoder, 9);
  Batch b = test::make_batch(model->config(), 4, 3);
  DecodeOptions o;
  o.max_len = 12;
  auto hyps = translate(*model, b, o);
  ASSERT_EQ(hyps.size(), 3u);
  int64_t total_len = 0;
  for (int64_t i = 0; i < 3; ++i) {
    Batch one;
    auto len = b.attention_mask[i].sum().item<int64_t>();
    one.input_ids = b.input_ids[i].narrow(0, 0, len).unsqueeze(0);
    one.attention_mask = torch::ones_like(one.input_ids);
    EXPECT_EQ(hyps[i], naive_greedy(*model, one, 12)) << "row " << i;
    total_len += static_cast<int64_t>(hyps[i].size());
  }
  EXPECT_GT(total_len, 0);
}

TEST(Search, CachedGreedyGenerationEqualsNaiveGreedy) {
  auto model = test::make_model(Arch::DecoderLM, 9);
  std::vector<int64_t> prompt = {1, 7, 9, 11};
  DecodeOptions o;
  o.max_len = 10;
  auto got = generate(*model, prompt, o);
  std::vector<int64_t> seq = prompt, want;
  torch::NoGradGuard g;
  for (int64_t t = 0; t < 10; ++t) {
    Batch b;
    b.input_ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    b.attention_mask = torch::ones_like(b.input_ids);
    int64_t tok = model->forward(b).logits[0][-1].argmax().item<int64_t>();
    if (tok == 2) break;
    want.push_back(tok);
    seq.push_back(tok);
  }
  EXPECT_EQ(got, want);
}

TEST(Search, BeamSearchReturnsOneHypothesisPerRowWithinLength) {
  auto model = test::make_model(Arch::EncoderDecoder, 9);
  Batch b = test::make_batch(model->config(), 4, 5);
  DecodeOptions o;
  o.beam_size = 4;
  o.max_len = 9;
  auto hyps = translate(*model, b, o);
  ASSERT_EQ(hyps.size(), 5u);
  for (const auto& h : hyps) {
    EXPECT_LE(h.size(), 9u);
    for (int64_t t : h) EXPECT_NE(t, 2);
  }
  o.beam_size = 0;
  EXPECT_THROW(translate(*model, b, o), std::invalid_argument);
  auto lm = test::make_model(Arch::DecoderLM);
  EXPECT_THROW(translate(*lm, b, DecodeOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace hp
