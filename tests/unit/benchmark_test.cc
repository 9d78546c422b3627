// Whole-model benchmarks: the FLOP count against a hand count, and the side-by-side records.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "headprune/eval/benchmark.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

ModelConfig one_layer_classifier() {
  ModelConfig c = tiny_config(Arch::EncoderClassifier);  // d_model 32, 4 heads of 8, d_ff 64, 3 classes
  c.n_encoder_layers = 1;
  c.encoder_self_heads.clear();
  c.finalize();
  return c;
}

TEST(ForwardFlops, MatchesAHandCount) {
  const ModelConfig c = one_layer_classifier();
  // batch 2, length 5: Q 2*2*5*32*32 + K,V 2*(2*2*5*32*32) + scores and values 2*(2*2*4*5*5*8)
  // + output 2*2*5*32*32 + FFN 2*(2*2*5*32*64) + pooler 2*2*32*32 + classifier 2*2*32*3.
  EXPECT_DOUBLE_EQ(forward_flops(c, 2, 5), 20480 + 40960 + 6400 + 20480 + 81920 + 4096 + 384);
  // Without heads the attention layer costs nothing; with half of them, half of its arithmetic.
  ModelConfig none = c;
  none.encoder_self_heads = {{}};
  EXPECT_DOUBLE_EQ(forward_flops(none, 2, 5), 81920 + 4096 + 384);
  ModelConfig half = c;
  half.encoder_self_heads = {{0, 3}};
  EXPECT_DOUBLE_EQ(forward_flops(half, 2, 5), (20480 + 40960 + 6400 + 20480) / 2 + 81920 + 4096 + 384);
}

TEST(BenchModels, RecordsEveryModelAndShapeWithSpeedupsAgainstTheFirst) {
  auto full = test::make_model(Arch::EncoderDecoder);
  auto pruned = remove_heads(*full, {{AttnType::EncoderSelf, 0, 1}, {AttnType::Cross, 1, 0}, {AttnType::Cross, 1, 2}});
  std::vector<BenchModel> models = {{"full", full}, {"pruned", pruned}};
  BenchOptions o;
  o.batch_sizes = {1, 3};
  o.seq_lens = {6};
  o.warmup = 1;
  o.reps = 3;
  int64_t calls = 0;
  const auto recs = bench_models(models, o, [&](int64_t, int64_t) { ++calls; });
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(recs[0].model, "full");
  EXPECT_EQ(recs[1].model, "pruned");
  EXPECT_EQ(recs[0].heads, 24);
  EXPECT_EQ(recs[1].heads, 21);
  EXPECT_DOUBLE_EQ(recs[0].ideal_speedup, 1.0);
  EXPECT_DOUBLE_EQ(recs[1].ideal_speedup, forward_flops(full->config(), 1, 6) / forward_flops(pruned->config(), 1, 6));
  EXPECT_GT(recs[1].ideal_speedup, 1.0);
  for (const auto& r : recs) {
    EXPECT_GT(r.median_ms, 0);
    EXPECT_LE(r.p10_ms, r.median_ms);
    EXPECT_LE(r.median_ms, r.p90_ms);
    EXPECT_NEAR(r.examples_per_s, 1000.0 * r.batch / r.median_ms, 1e-6);
    EXPECT_GT(r.paired_speedup, 0);
  }
  EXPECT_DOUBLE_EQ(recs[0].paired_speedup, 1.0);
  // A baseline timed through its own forward: the record still describes the model it stands for.
  std::vector<BenchModel> with_run = {{"full", full}, {"custom", full}};
  int64_t runs = 0;
  with_run[1].run = [&](const Batch& b) {
    ++runs;
    return full->forward(b).logits;
  };
  o.batch_sizes = {2};
  const auto r2 = bench_models(with_run, o);
  EXPECT_EQ(runs, o.warmup + o.reps);
  EXPECT_EQ(r2[1].heads, 24);
  o.seq_lens = {100000};
  EXPECT_THROW(bench_models(models, o), std::invalid_argument);
}

TEST(BenchModels, ALeastTimePerModelAddsRoundsForTheFastestModel) {
  auto full = test::make_model(Arch::EncoderClassifier);
  // Two stand-ins of known speed: 4 and 12 ms a run.
  std::vector<BenchModel> models = {{"fast", full}, {"slow", full}};
  int64_t runs = 0;
  const auto sleeper = [&](int ms) {
    return [&runs, ms, full](const Batch& b) mutable {
      ++runs;
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return full->forward(b).logits;
    };
  };
  models[0].run = sleeper(4);
  models[1].run = sleeper(12);
  BenchOptions o;
  o.batch_sizes = {1};
  o.seq_lens = {4};
  o.warmup = 1;
  o.reps = 2;
  o.gemm_probe = false;
  o.min_seconds = 0.1;  // 100 ms: about 25 rounds of the faster model, so the slower gets 300 ms
  const auto recs = bench_models(models, o);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].reps, recs[1].reps) << "the models are timed in the same rounds";
  EXPECT_GT(recs[0].reps, o.reps);
  // Rounds are added until every model's timed rounds sum to the 100 ms asked for: the faster model is
  // timed for about that (about 25 rounds here; fewer under a sanitizer, whose forward passes are slower).
  const double fast_ms = static_cast<double>(recs[0].reps) * recs[0].median_ms;
  EXPECT_GE(fast_ms, 60.0);  // the median times the rounds: below the sum where a few rounds ran long
  EXPECT_LE(fast_ms, 200.0);
  EXPECT_GE(static_cast<double>(recs[1].reps) * recs[1].median_ms, 2 * fast_ms) << "the slower model gets more time";
  EXPECT_EQ(runs, 2 * (o.warmup + recs[0].reps));
  EXPECT_EQ(recs[0].to_json().at("reps").get<int64_t>(), recs[0].reps);
  // Never fewer rounds than asked for; none added without a least time.
  o.reps = 40;
  EXPECT_EQ(bench_models(models, o)[0].reps, 40);
  o.reps = 3;
  o.min_seconds = 0;
  EXPECT_EQ(bench_models(models, o)[1].reps, 3);
  o.min_seconds = -1;
  EXPECT_THROW(bench_models(models, o), std::invalid_argument);
}

// Generation rows: prompt processing at each length and decoding after a prompt, their tokens per
// second, the FLOP counts of generation_flops (checked against a hand count) and the cache's bytes.
TEST(BenchModels, GenerationRowsTimePromptsAndDecodingSteps) {
  ModelConfig cfg = tiny_llama_config();  // d_model 32, 2 layers of 4 query heads of 8, 2 key/value heads
  auto full = test::make_model(cfg, 3);
  auto pruned = remove_heads(*full, {{AttnType::DecoderSelf, 0, 2}, {AttnType::DecoderSelf, 0, 3}});
  std::vector<BenchModel> models = {{"full", full}, {"pruned", pruned}};
  BenchOptions o;
  o.generation = true;
  o.batch_sizes = {2};
  o.seq_lens = {6, 9};
  o.new_tokens = 5;
  o.decode_after = 7;
  o.warmup = 1;
  o.reps = 2;
  int64_t calls = 0;
  const auto recs = bench_models(models, o, [&](int64_t, int64_t total) {
    ++calls;
    EXPECT_EQ(total, 3);
  });
  ASSERT_EQ(recs.size(), 6u);
  EXPECT_EQ(calls, 3);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(recs[i].mode, "prompt");
  EXPECT_EQ(recs[4].mode, "decode");
  EXPECT_EQ(recs[4].seq_len, 7);
  EXPECT_EQ(recs[4].new_tokens, 5);
  EXPECT_NEAR(recs[4].tokens_per_s, 1000.0 * 2 * 5 / recs[4].median_ms, 1e-6);
  EXPECT_NEAR(recs[2].tokens_per_s, 1000.0 * 2 * 9 / recs[2].median_ms, 1e-6);
  // The cache after 7 + 5 positions of 2 rows: keys and values of 2 layers x 2 groups of 8 (the pruned
  // model's first layer keeps one group), 4 bytes each.
  EXPECT_EQ(recs[4].kv_cache_bytes, 2 * 2 * (2 * 2) * 8 * 12 * 4);
  EXPECT_EQ(recs[5].kv_cache_bytes, 2 * 2 * (1 + 2) * 8 * 12 * 4);
  // Hand count, batch 1, a prompt of 3, full model: per layer queries 2*3*32*32, keys and values
  // 2*2*3*32*16, scores and values 2*2*4*3*3*8, output 2*3*32*32, feed-forward 3*2*3*32*48; the
  // output layer at one position 2*32*100.
  const double layer3 = 6144 + 6144 + 1152 + 6144 + 27648;
  EXPECT_DOUBLE_EQ(generation_flops(cfg, 1, 3, 0), 2 * layer3 + 6400);
  // Two steps after it: step i has one new position over 3 + i + 1 keys.
  auto step = [](double keys) { return 2048 + 2048 + 2 * 2 * 4 * keys * 8 + 2048 + 9216; };
  EXPECT_DOUBLE_EQ(generation_flops(cfg, 1, 3, 2), 2 * step(4) + 6400 + 2 * step(5) + 6400);
  EXPECT_DOUBLE_EQ(recs[4].gflops, generation_flops(cfg, 2, 7, 5) / 1e9);
  EXPECT_GT(recs[5].ideal_speedup, 1.0);
  // Refused: a classifier, and a prompt and its new tokens beyond max_positions.
  std::vector<BenchModel> cls = {{"cls", test::make_model(Arch::EncoderClassifier)}};
  EXPECT_THROW(bench_models(cls, o), std::invalid_argument);
  o.decode_after = cfg.max_positions;
  EXPECT_THROW(bench_models(models, o), std::invalid_argument);
}

}  // namespace
}  // namespace hp
