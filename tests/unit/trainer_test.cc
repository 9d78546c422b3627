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

// Distillation as recovery: the term is zero on a model identical to its teacher (with weight 1 and
// temperature 1 the first step's objective is 0 up to rounding), and with
// weight 1 a student trained on a teacher's outputs comes closer to them on held-out data.
// 40 steps of pure distillation (weight 1) from `teacher` at `temperature`, plus `hidden` times the
// hidden-state term.
TrainOptions distill_opts(Transformer& teacher, double temperature, double hidden) {
  TrainOptions o = small_opts();
  o.max_steps = 40;
  o.eval_every = o.save_every = 40;
  o.distill_weight = 1.0;
  o.distill_temperature = temperature;
  o.distill_hidden_weight = hidden;
  o.teacher = teacher.ptr();
  return o;
}

// Trains `student` with `o` (gradients on for the run only) into a scratch directory; leaves it in eval mode.
void train_distilled(Transformer& student, const TrainData& data, const TrainOptions& o) {
  torch::GradMode::set_enabled(true);
  test::TempDir dir;
  train_model(student, data, o, dir.path);
  torch::GradMode::set_enabled(false);
  student->eval();
}

TEST(Trainer, DistillationFromATeacher) {
  set_log_level(LogLevel::Warn);
  for (Arch arch : {Arch::DecoderLM, Arch::EncoderClassifier, Arch::EncoderDecoder}) {
    SCOPED_TRACE(to_string(arch));
    ModelConfig cfg = tiny_config(arch);
    cfg.dropout = cfg.attention_dropout = 0.0;
    if (arch == Arch::EncoderClassifier) cfg.n_classes = 2;
    auto teacher = test::make_model(cfg, 4);
    auto same = test::make_model(cfg, 4);
    teacher->eval();
    const auto data = small_data(cfg, 64);
    const Batch b = collate(data.valid, cfg.arch, cfg.pad_id);
    torch::NoGradGuard no_grad;
    const auto t_out = teacher->forward(b);
    EXPECT_EQ(distillation_kl(*teacher, same->forward(b), t_out, b, 1.0).item<double>(), 0.0);
    EXPECT_EQ(distillation_kl(*teacher, same->forward(b), t_out, b, 3.0).item<double>(), 0.0);
    {
      torch::GradMode::set_enabled(true);
      test::TempDir dir;
      TrainOptions o = small_opts();
      o.max_steps = 1;  // the first step's loss, before any update (Adam would scale rounding noise up)
      o.eval_every = o.save_every = 1;
      o.distill_weight = 1.0;
      o.teacher = teacher.ptr();
      // Training runs the student without the inference path's fused products: equal up to rounding.
      EXPECT_NEAR(train_model(same, data, o, dir.path).last_loss, 0.0, 1e-6);  // measured <= 1.4e-8
      torch::GradMode::set_enabled(false);
    }
    auto student = test::make_model(cfg, 9);
    const auto kl = [&] { return distillation_kl(*teacher, student->forward(b), t_out, b, 1.0).item<double>(); };
    const double before = kl();
    EXPECT_GT(before, 0.0);
    TrainOptions o = distill_opts(teacher, 2.0, 0.0);
    train_distilled(student, data, o);
    EXPECT_LT(kl(), 0.5 * before);
    // The options travel in the run's JSON, the teacher does not; without one the run is refused.
    const auto j = o.to_json();
    EXPECT_EQ(j.at("distill_weight"), 1.0);
    EXPECT_EQ(TrainOptions::from_json(j).to_json(), j);
    torch::GradMode::set_enabled(true);
    TrainOptions alone = TrainOptions::from_json(j);
    test::TempDir other;
    EXPECT_NE(test::error_of([&] { train_model(student, data, alone, other.path); }).find("needs a teacher"),
              std::string::npos);
    alone.teacher = teacher.ptr();
    alone.distill_weight = 1.5;
    EXPECT_NE(test::error_of([&] { train_model(student, data, alone, other.path); }).find("distill_weight must be a number in [0, 1], not 1.5"),
              std::string::npos);
  }
  set_log_level(LogLevel::Info);
}

TEST(Trainer, HiddenStateDistillation) {
  set_log_level(LogLevel::Warn);
  for (Arch arch : {Arch::DecoderLM, Arch::EncoderClassifier, Arch::EncoderDecoder}) {
    SCOPED_TRACE(to_string(arch));
    ModelConfig cfg = tiny_config(arch);
    cfg.dropout = cfg.attention_dropout = 0.0;
    if (arch == Arch::EncoderClassifier) cfg.n_classes = 2;
    auto teacher = test::make_model(cfg, 4);
    teacher->eval();
    const auto data = small_data(cfg, 64);
    const Batch b = collate(data.valid, cfg.arch, cfg.pad_id);
    torch::NoGradGuard no_grad;
    const auto states_of = [&](Transformer& m) {
      HiddenStates h(*m, true);
      m->forward(b);
      return h.states;
    };
    const auto t_states = states_of(teacher);
    // One state per attention sub-layer (self and cross), the hooks gone afterwards.
    EXPECT_EQ(t_states.size(), teacher->head_masks().size());
    for (auto& g : teacher->head_masks()) EXPECT_FALSE(teacher->attention(g.type, g.layer).on_output);
    auto same = test::make_model(cfg, 4);
    same->eval();
    EXPECT_EQ(hidden_state_mse(states_of(same), t_states).item<double>(), 0.0);
    // By hand: the mean over layers of each layer's mean squared difference.
    auto student = test::make_model(cfg, 9);
    student->eval();
    const auto s_states = states_of(student);
    double by_hand = 0;
    for (size_t i = 0; i < s_states.size(); ++i) by_hand += (s_states[i] - t_states[i]).pow(2).mean().item<double>();
    by_hand /= static_cast<double>(s_states.size());
    const double before = hidden_state_mse(s_states, t_states).item<double>();
    EXPECT_NEAR(before, by_hand, 1e-6 * by_hand);
    EXPECT_GT(before, 0.0);
    EXPECT_NE(test::error_of([&] { hidden_state_mse({s_states[0]}, t_states); }).find("same layers"), std::string::npos);
    // Training on distillation alone (KL and hidden states, no task loss) brings the states together.
    TrainOptions o = distill_opts(teacher, 1.0, 1.0);
    train_distilled(student, data, o);
    EXPECT_LT(hidden_state_mse(states_of(student), t_states).item<double>(), 0.7 * before);
    EXPECT_EQ(TrainOptions::from_json(o.to_json()).distill_hidden_weight, 1.0);
    o.teacher.reset();
    o.distill_weight = 0;
    torch::GradMode::set_enabled(true);
    test::TempDir other;
    EXPECT_NE(test::error_of([&] { train_model(student, data, o, other.path); }).find("needs a teacher"),
              std::string::npos);
    torch::GradMode::set_enabled(false);
  }
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
  // One table writes, reads and checks them (train_option_table): every row is in the record, and a
  // value out of its range is an error naming the field, whether read or set in code.
  for (const auto& f : train_option_table().fields()) EXPECT_TRUE(j.contains(f.key)) << f.key;
  std::string e = test::error_of([] { TrainOptions::from_json({{"label_smoothing", 1.0}}); });
  EXPECT_NE(e.find("label_smoothing"), std::string::npos) << e;
  EXPECT_NE(e.find("must be a number in [0, 1)"), std::string::npos) << e;
  e = test::error_of([] { TrainOptions::from_json({{"seed", -2}}); });
  EXPECT_NE(e.find("seed"), std::string::npos) << e;
  o = small_opts();
  o.eval_every = 0;
  e = test::error_of([&] { train_model(model, data, o, dir.path); });
  EXPECT_NE(e.find("train: eval_every must be an integer >= 1, not 0"), std::string::npos) << e;
  TrainOptions s = small_opts();
  s.seed = 1234567890123ull;
  s.schedule = LrSchedule::InverseSqrt;
  s.adam.beta2 = 0.95;
  EXPECT_EQ(TrainOptions::from_json(s.to_json()).to_json(), s.to_json());
  EXPECT_EQ(TrainOptions::from_json(s.to_json()).seed, s.seed);
}

}  // namespace
}  // namespace hp
