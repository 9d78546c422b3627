// Fixed-shape replay (util/shape_graphs.h, eval/graph_forward.h): the static buffers of a recording
// and the buckets a data set's batches are padded to. On the CPU the recording is emulated
// (GraphReplay::Emulate: the same buffers, the function run again); with HP_TEST_DEVICE=cuda the
// GraphReplayOnTheTestDevice suite records and replays real CUDA graphs.
#include <gtest/gtest.h>

#include "headprune/decode/search.h"
#include "headprune/eval/benchmark.h"
#include "headprune/eval/evaluate.h"
#include "headprune/eval/graph_forward.h"
#include "headprune/model/remove_heads.h"
#include "headprune/util/shape_graphs.h"
#include "headprune/util/torch_compat.h"
#include "test_util.h"

namespace hp {
namespace {

GraphReplay test_mode() { return test::device().is_cuda() ? GraphReplay::Cuda : GraphReplay::Emulate; }

TEST(ShapeGraphs, StaticOutputsAreOverwrittenByTheNextCallAtTheSameShapes) {
  int64_t calls = 0;
  ShapeGraphs g(
      [&](const std::vector<torch::Tensor>& in) {
        ++calls;
        return std::vector<torch::Tensor>{in[0] * 2 + (in[1].defined() ? in[1] : torch::zeros_like(in[0]))};
      },
      GraphReplay::Emulate);
  const auto a = torch::arange(6, torch::kFloat).view({2, 3});
  const torch::Tensor first = g({a, {}}).front();
  EXPECT_TRUE(torch::equal(first, a * 2));
  EXPECT_EQ(g.recorded(), 1u);
  EXPECT_EQ(calls, 1);  // set up on the caller's inputs: no second run for the first call
  const auto b = torch::ones({2, 3});
  const torch::Tensor second = g({b, {}}).front();
  EXPECT_TRUE(torch::equal(second, b * 2));
  EXPECT_TRUE(torch::equal(first, b * 2));  // the same static tensor: overwritten, as a replay overwrites
  EXPECT_EQ(first.data_ptr(), second.data_ptr());
  EXPECT_EQ(g.recorded(), 1u);
  // Another shape, and a defined second input, are other recordings; the first one is kept.
  EXPECT_TRUE(torch::equal(g({torch::ones({4}), {}}).front(), torch::full({4}, 2.0)));
  EXPECT_TRUE(torch::equal(g({a, b}).front(), a * 2 + b));
  EXPECT_EQ(g.recorded(), 3u);
  EXPECT_TRUE(torch::equal(g({a, {}}).front(), a * 2));
  EXPECT_EQ(g.recorded(), 3u);
  // The caller's inputs are copied in, never used in place: changing them afterwards changes nothing.
  auto c = torch::full({2, 3}, 5.0);
  const torch::Tensor out = g({c, {}}).front();
  c.fill_(0);
  EXPECT_TRUE(torch::equal(out, torch::full({2, 3}, 10.0)));
}

TEST(ShapeGraphs, OffCallsDirectlyAndModesParse) {
  ShapeGraphs g([](const std::vector<torch::Tensor>& in) { return std::vector<torch::Tensor>{in[0] + 1}; },
                GraphReplay::Off);
  const auto a = torch::zeros({3});
  const torch::Tensor x = g({a}).front();
  const torch::Tensor y = g({a}).front();
  EXPECT_NE(x.data_ptr(), y.data_ptr());
  EXPECT_EQ(g.recorded(), 0u);
  for (auto m : {GraphReplay::Off, GraphReplay::Cuda, GraphReplay::Emulate})
    EXPECT_EQ(parse_graph_replay(graph_replay_name(m)), m);
  EXPECT_NE(test::error_of([] { parse_graph_replay("on"); }).find("off, cuda or emulate"), std::string::npos);
  if (!compat::has_cuda_graphs()) {  // a CPU-only LibTorch: a clear refusal, not a silent fall-back
    const auto msg = test::error_of([] { ShapeGraphs({}, GraphReplay::Cuda); });
    EXPECT_NE(msg.find("LibTorch built with CUDA"), std::string::npos) << msg;
  } else {  // CUDA graphs replay on the GPU only
    ShapeGraphs cuda([](const std::vector<torch::Tensor>& in) { return in; }, GraphReplay::Cuda);
    EXPECT_NE(test::error_of([&] { cuda({torch::zeros({2})}); }).find("CUDA device"), std::string::npos);
  }
}

TEST(GraphBucket, NextPowerOfTwoWithinTheLimit) {
  EXPECT_EQ(graph_bucket(1, 512), 1);
  EXPECT_EQ(graph_bucket(3, 512), 4);
  EXPECT_EQ(graph_bucket(64, 512), 64);
  EXPECT_EQ(graph_bucket(65, 512), 128);
  EXPECT_EQ(graph_bucket(300, 400), 400);  // the limit (max_positions)
  EXPECT_EQ(graph_bucket(500, 400), 500);  // never below the size itself
  EXPECT_THROW(graph_bucket(0, 8), std::invalid_argument);
}

class GraphReplayOnTheTestDevice : public ::testing::TestWithParam<test::Fam> {};

// Every family, with padding in the batch and a head-pruned model: the replayed logits of a batch
// padded up to its bucket are the ordinary forward pass's, on the batch's own rows and positions.
TEST_P(GraphReplayOnTheTestDevice, BucketedReplaysEqualTheForwardPass) {
  const auto device = test::device();
  auto full = test::make_model(GetParam());
  const auto& cfg = full->config();
  const AttnType t = cfg.attn_types().front();
  auto pruned = remove_heads(*full, {{t, 0, 0}, {t, 0, 1}});
  for (auto* model : {&full, &pruned}) {
    (*model)->to(device);
    (*model)->eval();
    c10::InferenceMode inference;
    GraphForward replay(**model, test_mode(), /*buckets=*/true);
    for (int64_t rows : {3, 2, 3}) {  // 3 -> bucket 4 twice (one recording), 2 -> bucket 2
      Batch b = test::make_batch(cfg, 11 + static_cast<uint64_t>(rows), rows).to(device);
      b.attention_mask.narrow(1, b.attention_mask.size(1) - 2, 2).narrow(0, 0, 1).fill_(0);  // a padded row
      b.input_ids.narrow(1, b.input_ids.size(1) - 2, 2).narrow(0, 0, 1).fill_(cfg.pad_id);
      const auto want = (*model)->forward(b).logits;
      const auto got = replay.logits(b);
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_LT(test::max_abs_diff(got, want), 1e-4) << rows << " rows";
    }
    EXPECT_EQ(replay.recorded(), 2u);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GraphReplayOnTheTestDevice, HP_ALL_FAMILIES);

// Decoding steps on caches of fixed size (LmSession with graphs): every step's logits equal the full
// forward pass's at that position, for GPT-style (learned positions) and LLaMA-style (rotary, grouped
// query attention) decoders, unpruned, with a query head removed (uneven groups), with a whole group
// removed, and with a sliding window; after a reorder (beam search, in place); and again after a rewind.
class ReplayedDecoding : public ::testing::TestWithParam<test::Fam> {};

TEST_P(ReplayedDecoding, StepsEqualTheFullForwardPass) {
  const auto device = test::device();
  ModelConfig cfg = test::config_of(GetParam());
  cfg.max_positions = 64;
  cfg.finalize();
  auto full = test::make_model(cfg, 21);
  ModelConfig windowed = cfg;
  windowed.sliding_window = 7;
  windowed.finalize();
  const auto t = AttnType::DecoderSelf;
  std::vector<std::pair<std::string, Transformer>> models = {
      {"unpruned", full},
      {"a query head removed", remove_heads(*full, {{t, 0, 1}})},
      {"a layer's heads halved", remove_heads(*full, {{t, 1, 2}, {t, 1, 3}})},
      {"sliding window", test::make_model(windowed, 21)}};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto ids = torch::randint(4, cfg.vocab_size, {2, 40}, gen, torch::kLong).to(device);
  for (auto& [name, model] : models) {
    SCOPED_TRACE(name);
    model->to(device);
    model->eval();
    c10::InferenceMode inference;
    Batch b;
    b.input_ids = ids;
    const auto want = model->forward(b).logits;  // [2, 40, V]
    LmSession s(*model, test_mode(), 40);
    double worst = test::max_abs_diff(s.feed(ids.narrow(1, 0, 6)), want.select(1, 5));
    for (int64_t p = 6; p < 40; ++p) {
      if (p == 20) {  // rows swapped in place, and swapped back: the same caches as before
        s.reorder(torch::tensor({1, 0}, torch::kLong));
        s.reorder(torch::tensor({1, 0}, torch::kLong));
      }
      worst = std::max(worst, test::max_abs_diff(s.feed(ids.narrow(1, p, 1)), want.select(1, p)));
    }
    EXPECT_LT(worst, 1e-4);
    LmSession plain(*model);
    plain.feed(ids);
    EXPECT_EQ(s.kv_cache_bytes(), plain.kv_cache_bytes());  // the positions fed, not the buffers
    plain.rewind(30);  // a growing cache rewinds too: its later positions are written again in place
    worst = 0;
    for (int64_t p = 30; p < 40; ++p)
      worst = std::max(worst, test::max_abs_diff(plain.feed(ids.narrow(1, p, 1)), want.select(1, p)));
    EXPECT_LT(worst, 1e-4);
    s.rewind(10);  // the same steps again, on the same caches
    worst = 0;
    for (int64_t p = 10; p < 40; ++p)
      worst = std::max(worst, test::max_abs_diff(s.feed(ids.narrow(1, p, 1)), want.select(1, p)));
    EXPECT_LT(worst, 1e-4);
    EXPECT_NE(test::error_of([&] { s.feed(ids.narrow(1, 0, 1)); }).find("past the replayed session's 40 positions"),
              std::string::npos);
    s.rewind(20);
    EXPECT_NE(test::error_of([&] { s.feed(ids.narrow(1, 0, 3)); }).find("one token per row"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(DecoderFamilies, ReplayedDecoding,
                         ::testing::Values(test::Fam::DecoderLM, test::Fam::Llama),
                         [](const auto& info) { return test::name_of(info.param); });

TEST(GraphReplay, GenerateWithReplayedStepsEqualsGenerateWithout) {
  auto model = test::make_model(test::Fam::Llama, 3);
  DecodeOptions o;
  o.max_len = 12;
  o.eos_id = -1;  // never stops early
  for (int64_t beam : {1, 3}) {
    o.beam_size = beam;
    o.graphs = GraphReplay::Off;
    const auto want = generate(*model, {5, 9, 4, 7}, o);
    o.graphs = GraphReplay::Emulate;
    EXPECT_EQ(generate(*model, {5, 9, 4, 7}, o), want) << "beam " << beam;
    EXPECT_EQ(want.size(), 12u);
  }
  EXPECT_THROW(LmSession(*model, GraphReplay::Emulate, 1), std::invalid_argument);
  EXPECT_THROW(LmSession(*model, GraphReplay::Emulate, model->config().max_positions + 1), std::invalid_argument);
}

TEST(GraphReplay, EvaluateWithBucketsEqualsEvaluateWithout) {
  for (auto arch : {Arch::EncoderClassifier, Arch::DecoderLM}) {
    auto model = test::make_model(arch);
    const auto set = test::synthetic_set(model->config(), 37);
    EvalOptions plain, replayed;
    plain.max_batch = replayed.max_batch = 5;  // several batches of several shapes
    replayed.graphs = GraphReplay::Emulate;
    const auto a = evaluate(*model, set.examples, plain);
    const auto b = evaluate(*model, set.examples, replayed);
    EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::max(1.0, std::abs(a.loss))) << to_string(arch);
    EXPECT_EQ(a.n_tokens, b.n_tokens);
    EXPECT_EQ(a.predictions, b.predictions);
  }
}

TEST(GraphReplay, BenchRecordsTheModeAndRefusesWhatItCannotReplay) {
  auto model = test::make_model(Arch::DecoderLM);
  std::vector<BenchModel> models = {{"lm", model}};
  BenchOptions o;
  o.batch_sizes = {2};
  o.seq_lens = {6};
  o.warmup = 1;
  o.reps = 2;
  o.gemm_probe = false;
  o.graphs = GraphReplay::Emulate;
  const auto recs = bench_models(models, o);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].graphs, "emulate");
  EXPECT_EQ(recs[0].to_json()["graphs"], "emulate");
  // Generation: prompts run as without graphs, decoding steps are replayed on caches of fixed size.
  o.generation = true;
  o.new_tokens = 4;
  o.decode_after = 3;
  const auto gen = bench_models(models, o);
  ASSERT_EQ(gen.size(), 2u);
  EXPECT_EQ(gen[0].mode, "prompt");
  EXPECT_EQ(gen[0].graphs, "off");
  EXPECT_EQ(gen[1].mode, "decode");
  EXPECT_EQ(gen[1].graphs, "emulate");
  o.graphs = GraphReplay::Off;
  EXPECT_EQ(bench_models(models, o)[1].kv_cache_bytes, gen[1].kv_cache_bytes);  // 3 + 4 positions either way
  o.graphs = GraphReplay::Emulate;
  o.generation = false;
  o.train = true;
  EXPECT_NE(test::error_of([&] { bench_models(models, o); }).find("--graphs"), std::string::npos);
}

}  // namespace
}  // namespace hp
