// Whole-model benchmarks: the FLOP count against a hand count, and the side-by-side records.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hp
