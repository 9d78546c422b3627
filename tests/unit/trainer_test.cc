// The training loop on the built-in synthetic tasks: learning, exact resume, gates kept.
#include <filesystem>

#include <gtest/gtest.h>

#include "headprune/data/synthetic.h"
#include "headprune/io/checkpoint.h"
#include "headprune/train/trainer.h"
#include "headprune/util/log.h"
#include "test_util.h"

namespace hp {
namespace {

TrainData small_data(const ModelConfig& cfg, int64_t n_train = 256) {
  return {synthetic_examples(cfg, n_train, 3, 10, 1), synthetic_examples(cfg, 64, 3, 10, 2)};
}

TrainOptions small_opts() {
  TrainOptions o;
  o.max_steps = 24;
  o.batch_tokens = 256;
  o.lr = 2e-3;
  o.warmup_steps = 4;
  o.eval_every = 8;
  o.log_every = 1000;
  o.save_every = 4;
  o.seed = 3;
  return o;
}

TEST(Trainer, LearnsTheSyntheticClassificationTask) {
  set_log_level(LogLevel::Warn);
  test::TempDir dir;
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.dropout = cfg.attention_dropout = 0.0;
  cfg.n_classes = 2;
  torch::manual_seed(0);
  Transformer model(cfg);
  auto data = small_data(cfg, 512);
  auto before = evaluate(*model, data.valid);
  TrainOptions o = small_opts();
  o.max_steps = 150;
  o.eval_every = 50;
  auto res = train_model(model, data, o, dir.path);
  auto after = evaluate(*model, data.valid);
  EXPECT_EQ(res.steps, 150);
  EXPECT_EQ(res.history.size(), 3u);
  EXPECT_LT(after.loss, before.loss - 0.05);
  EXPECT_GT(after.classification->accuracy, 0.7);
  // best/ holds the best accuracy seen; last/ can resume.
  auto best = load_checkpoint(dir / "best");
  EXPECT_NEAR(evaluate(*best, data.valid).classification->accuracy, res.best_metric, 1e-9);
  EXPECT_TRUE(std::filesystem::exists(dir / "last/optimizer.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "history.json"));
  set_log_level(LogLevel::Info);
}

class TrainerResume : public ::testing::TestWithParam<test::Fam> {};

TEST_P(TrainerResume, InterruptedRunResumesToTheSameResult) {
  set_log_level(LogLevel::Warn);
  ModelConfig cfg = test::config_of(GetParam());  // dropout 0.1: the RNG state must be restored too
  auto data = small_data(cfg);
  TrainOptions o = small_opts();
  o.label_smoothing = 0.1;
  test::TempDir a, b;
  const auto device = test::device();  // HP_TEST_DEVICE=cuda: trained and resumed on the GPU
  torch::manual_seed(5);
  Transformer m1(cfg);
  m1->to(device);
  auto full = train_model(m1, data, o, a.path);

  torch::manual_seed(5);
  Transformer m2(cfg);
  m2->to(device);
  TrainOptions cut = o;
  cut.stop_after = 14;  // killed between the resume points at 12 and 16
  auto part = train_model(m2, data, cut, b.path);
  EXPECT_TRUE(part.interrupted);
  Transformer m3(test::config_of(GetParam()));  // fresh weights: resume must replace them
  m3->to(device);
  TrainOptions again = o;
  again.resume = true;
  auto resumed = train_model(m3, data, again, b.path);
  EXPECT_EQ(resumed.steps, full.steps);
  EXPECT_NEAR(resumed.last_loss, full.last_loss, 1e-6);
  EXPECT_EQ(resumed.history.size(), full.history.size());
  double max_diff = 0;
  auto p1 = m1->named_parameters();
  auto p3 = m3->named_parameters();
  for (auto& kv : p1) max_diff = std::max(max_diff, test::max_abs_diff(kv.value(), p3[kv.key()]));
  EXPECT_LE(max_diff, 1e-6);
  set_log_level(LogLevel::Info);
}

INSTANTIATE_TEST_SUITE_P(Families, TrainerResume,
                         HP_ALL_FAMILIES);

TEST(Trainer, MaskedHeadsStayMaskedDuringTraining) {
  set_log_level(LogLevel::Warn);
  test::TempDir dir;
  ModelConfig cfg = tiny_config(Arch::EncoderDecoder);
  torch::manual_seed(1);
  Transformer model(cfg);
  // In gate order (encoder self, decoder self, cross), as masked_heads() lists them.
  std::vector<HeadId> masked = {{AttnType::EncoderSelf, 0, 1}, {AttnType::DecoderSelf, 1, 0}, {AttnType::Cross, 1, 3}};
  model->mask_heads(masked);
  auto data = small_data(cfg);
  TrainOptions o = small_opts();
  o.max_steps = 8;
  train_model(model, data, o, dir.path);
  EXPECT_EQ(model->masked_heads(), masked);
  double open = 0, total = 0;
  for (auto& g : model->head_masks()) {
    open += g.mask.sum().item<double>();
    total += static_cast<double>(g.heads.size());
  }
  EXPECT_EQ(open, total - 3);
  EXPECT_EQ(load_checkpoint(dir / "last")->masked_heads(), masked);
  set_log_level(LogLevel::Info);
}

TEST(Trainer, KeepsSnapshotsForImportanceOverTraining) {
  set_log_level(LogLevel::Warn);
  test::TempDir dir;
  ModelConfig cfg = tiny_config(Arch::DecoderLM);
  torch::manual_seed(1);
  Transformer model(cfg);
  TrainOptions o = small_opts();
  o.max_steps = 8;
  o.keep_every = 4;
  train_model(model, small_data(cfg), o, dir.path);
  EXPECT_TRUE(std::filesystem::exists(dir / "step-000004/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "step-000004/optimizer.safetensors"));  // model only
  // The last snapshot is the final model.
  model->eval();
  auto snap = load_checkpoint(dir / "step-000008");
  const Batch b = test::make_batch(cfg);
  EXPECT_EQ(test::max_abs_diff(model->forward(b).logits, snap->forward(b).logits), 0.0);
  set_log_level(LogLevel::Info);
}

TEST(Trainer, BadOptionsAreClearErrors) {
  ModelConfig cfg = tiny_config(Arch::DecoderLM);
  Transformer model(cfg);
  test::TempDir dir;
  auto data = small_data(cfg, 8);
  TrainOptions o = small_opts();
  o.lr = 0;
  EXPECT_THROW(train_model(model, data, o, dir.path), std::invalid_argument);
  o = small_opts();
  o.best_metric = "accuracy";
  EXPECT_THROW(train_model(model, data, o, dir.path), std::invalid_argument);
  EXPECT_THROW(TrainOptions::from_json({{"max_stpes", 3}}), std::invalid_argument);
  auto j = small_opts().to_json();
  EXPECT_EQ(TrainOptions::from_json(j).to_json(), j);
}

}  // namespace
}  // namespace hp
