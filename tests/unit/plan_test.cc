// Pruning plans, strategies, applying them (mask vs. removal), iterative pruning, curves and
// the compensation table.
#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "headprune/io/formats.h"

#include "headprune/model/geometry.h"
#include "headprune/prune/pruning.h"
#include "headprune/prune/strategy.h"
#include "headprune/util/log.h"
#include "test_util.h"

namespace hp {
namespace {

ModelConfig six_layer_config() {
  ModelConfig c = tiny_config(Arch::EncoderClassifier);
  c.n_encoder_layers = 6;
  c.encoder_self_heads.clear();
  c.finalize();
  return c;
}

HeadScores layer_index_scores(const ModelConfig& cfg) {
  // Score = 10 * layer + head: lowest are layer 0's first heads.
  HeadScores s;
  s.method = "test";
  for (const auto& h : kept_heads(cfg)) s.scores[h] = 10.0 * static_cast<double>(h.layer) + static_cast<double>(h.head);
  return s;
}

TEST(Plan, JsonRoundTripAndErrors) {
  PruningPlan p;
  p.strategy = "manual";
  p.heads = {{AttnType::EncoderSelf, 0, 1}, {AttnType::Cross, 1, 3}};
  const auto back = PruningPlan::from_json(p.to_json());
  EXPECT_EQ(back.heads, p.heads);
  EXPECT_EQ(back.strategy, "manual");
  EXPECT_EQ(p.to_json().at("format"), kPlanFormat);
  // Another headprune file holding "heads" (a gates or roles result) is refused by its tag, not read as a plan.
  auto other = p.to_json();
  other["format"] = "headprune-gates/1";
  try {
    PruningPlan::from_json(other, "gates.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gates.json: field 'format' is 'headprune-gates/1'"), std::string::npos) << e.what();
  }
  other["format"] = "headprune-plan/2";
  EXPECT_THROW(PruningPlan::from_json(other, "plan.json"), std::invalid_argument);
  other.erase("format");  // hand-written plans without a tag are read by their heads
  EXPECT_EQ(PruningPlan::from_json(other, "plan.json").heads, p.heads);

  test::TempDir dir;
  save_plan(dir / "plan.json", p);
  EXPECT_EQ(read_plan(dir / "plan.json").heads, p.heads);
  std::ofstream(dir / "bad.json") << R"({"heads": ["encoder_self:0:1", "nonsense"]})";
  try {
    read_plan(dir / "bad.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: heads[1]"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "dup.json") << R"({"heads": ["encoder_self:0:1", "enc:0:1"]})";
  EXPECT_THROW(read_plan(dir / "dup.json"), std::invalid_argument);
  std::ofstream(dir / "broken.json") << "{";
  EXPECT_THROW(read_plan(dir / "broken.json"), std::runtime_error);
  EXPECT_THROW(read_plan(dir / "missing.json"), std::runtime_error);
}

TEST(Plan, ValidationAgainstTheModel) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.finalize();
  PruningPlan p;
  p.heads = {{AttnType::Cross, 0, 0}};
  EXPECT_THROW(validate_plan(p, cfg), std::invalid_argument);  // no cross attention
  p.heads = {{AttnType::EncoderSelf, 5, 0}};
  EXPECT_THROW(validate_plan(p, cfg), std::invalid_argument);  // no layer 5
  p.heads = {{AttnType::EncoderSelf, 0, 9}};
  EXPECT_THROW(validate_plan(p, cfg), std::invalid_argument);  // no head 9
  cfg.encoder_self_heads[0] = {0, 2, 3};
  p.heads = {{AttnType::EncoderSelf, 0, 1}};
  EXPECT_THROW(validate_plan(p, cfg), std::invalid_argument);  // already removed
  p.heads = kept_heads(cfg);                                   // every head: allowed
  EXPECT_NO_THROW(validate_plan(p, cfg));
}

TEST(Plan, Targets) {
  EXPECT_DOUBLE_EQ(*parse_target("0.3").fraction, 0.3);
  EXPECT_DOUBLE_EQ(*parse_target("30%").fraction, 0.3);
  EXPECT_EQ(*parse_target("12").count, 12);
  EXPECT_THROW(parse_target("1.5"), std::invalid_argument);
  EXPECT_THROW(parse_target("-3"), std::invalid_argument);
  EXPECT_THROW(parse_target("half"), std::invalid_argument);
  EXPECT_EQ(parse_target("0.5").resolve(24, "t"), 12);
  EXPECT_THROW(parse_target("25").resolve(24, "t"), std::invalid_argument);
}

TEST(Plan, ByScoreGlobalPerLayerAndMinimum) {
  const ModelConfig cfg = six_layer_config();  // 6 layers x 4 heads
  const auto s = layer_index_scores(cfg);
  ScorePlanOptions o;
  o.target.count = 6;
  auto p = plan_by_score(s, cfg, o);
  ASSERT_EQ(p.heads.size(), 6u);
  // Lowest six: all of layer 0 and heads 0, 1 of layer 1.
  EXPECT_EQ(p.heads.front(), (HeadId{AttnType::EncoderSelf, 0, 0}));
  EXPECT_EQ(p.heads.back(), (HeadId{AttnType::EncoderSelf, 1, 1}));

  o.min_per_layer = 1;  // layer 0 keeps its best head; the next lowest come from layer 1
  p = plan_by_score(s, cfg, o);
  std::map<int64_t, int> per_layer;
  for (const auto& h : p.heads) ++per_layer[h.layer];
  EXPECT_EQ(per_layer[0], 3);
  EXPECT_EQ(per_layer[1], 3);

  ScorePlanOptions pl;
  pl.per_layer = true;
  pl.target.fraction = 0.5;
  p = plan_by_score(s, cfg, pl);
  ASSERT_EQ(p.heads.size(), 12u);
  for (const auto& h : p.heads) EXPECT_LT(h.head, 2) << to_string(h);

  // Orientation: with lower = more important, the highest scores go first.
  auto inv = s;
  inv.higher_is_important = false;
  o.min_per_layer = 0;
  o.target.count = 1;
  EXPECT_EQ(plan_by_score(inv, cfg, o).heads.front(), (HeadId{AttnType::EncoderSelf, 5, 3}));
  // Excluded (e.g. already masked) heads are never chosen.
  o.exclude = {{AttnType::EncoderSelf, 0, 0}};
  EXPECT_EQ(plan_by_score(s, cfg, o).heads.front(), (HeadId{AttnType::EncoderSelf, 0, 1}));
  // A map of another model is an error naming the head.
  HeadScores partial = s;
  partial.scores.erase({AttnType::EncoderSelf, 2, 2});
  EXPECT_THROW(plan_by_score(partial, cfg, o), std::invalid_argument);
}

TEST(Plan, RandomLayerStrategies) {
  const ModelConfig cfg = six_layer_config();
  const std::map<LayerChoice, std::set<int64_t>> eligible = {
      {LayerChoice::Uniform, {0, 1, 2, 3, 4, 5}}, {LayerChoice::AvoidMiddle, {0, 1, 4, 5}},
      {LayerChoice::AvoidConsecutive, {0, 2, 4}}, {LayerChoice::Top, {3, 4, 5}},
      {LayerChoice::Bottom, {0, 1, 2}}};
  for (const auto& [ls, layers] : eligible) {
    SCOPED_TRACE(to_string(ls));
    RandomPlanOptions o;
    o.layers = ls;
    o.target.count = 10;
    o.seed = 3;
    const auto p = plan_random(cfg, o);
    ASSERT_EQ(p.heads.size(), 10u);
    for (const auto& h : p.heads) EXPECT_TRUE(layers.count(h.layer)) << to_string(h);
    EXPECT_EQ(plan_random(cfg, o).heads, p.heads);  // seeded
    o.seed = 4;
    EXPECT_NE(plan_random(cfg, o).heads, p.heads);
    o.target.count = static_cast<int64_t>(layers.size()) * 4 + 1;  // more than the eligible layers hold
    if (o.target.count <= 24) {
      EXPECT_THROW(plan_random(cfg, o), std::invalid_argument);
    }
  }
  // Smaller targets are subsets of larger ones with the same seed (nested curves).
  RandomPlanOptions a, b;
  a.target.count = 5;
  b.target.count = 9;
  const auto pa = plan_random(cfg, a), pb = plan_random(cfg, b);
  for (const auto& h : pa.heads) EXPECT_NE(std::find(pb.heads.begin(), pb.heads.end(), h), pb.heads.end());
  EXPECT_THROW(parse_layer_choice("middle"), std::invalid_argument);
}

TEST(Plan, LayersAndManual) {
  ModelConfig cfg = tiny_config(Arch::EncoderDecoder);
  cfg.finalize();
  auto p = plan_layers(cfg, {{AttnType::Cross, 1}, {AttnType::EncoderSelf, 0}});
  EXPECT_EQ(p.heads.size(), 8u);
  EXPECT_THROW(plan_layers(cfg, {{AttnType::Cross, 2}}), std::invalid_argument);
  p = plan_manual("encoder_self:0:3, cross:1:2", cfg);
  EXPECT_EQ(p.heads, (std::vector<HeadId>{{AttnType::EncoderSelf, 0, 3}, {AttnType::Cross, 1, 2}}));
  p = plan_manual(R"({"0": [1, 2], "1": [0]})", cfg, AttnType::DecoderSelf);
  EXPECT_EQ(p.heads.size(), 3u);
  EXPECT_EQ(p.heads.front(), (HeadId{AttnType::DecoderSelf, 0, 1}));
  EXPECT_THROW(plan_manual(R"({"x": [1]})", cfg), std::invalid_argument);
  EXPECT_THROW(plan_manual("cross:7:0", cfg), std::invalid_argument);
  EXPECT_THROW(plan_manual("cross:0:0,cross:0:0", cfg), std::invalid_argument);
}

using test::synthetic_set;

class Pruning : public ::testing::TestWithParam<test::Fam> {};

// The same plan as a mask and as a physical removal gives the same metrics.
// The strategy every front end infers (the CLI's prune, Python's plan and prune): named, else implied
// by its input, else score; an input of another strategy refused with one message.
TEST(PlanStrategyInference, NamedImpliedOrRefusedAlike) {
  auto settled = [](PlanSpec spec, std::optional<PlanStrategy> named, bool given = false) {
    settle_plan_strategy(spec, named, given);
    return spec.strategy;
  };
  PlanSpec none, file, budget, heads, file_budget;
  file.plan_file = file_budget.plan_file = "p.json";
  budget.budget = file_budget.budget = "params=0.8x";
  heads.heads = "encoder_self:0:1";
  EXPECT_EQ(settled(none, std::nullopt), PlanStrategy::Score);
  EXPECT_EQ(settled(none, PlanStrategy::Random), PlanStrategy::Random);
  EXPECT_EQ(settled(file, std::nullopt), PlanStrategy::File);
  EXPECT_EQ(settled(budget, std::nullopt), PlanStrategy::Budget);
  EXPECT_EQ(settled(heads, std::nullopt), PlanStrategy::Manual);
  EXPECT_EQ(settled(none, std::nullopt, true), PlanStrategy::Given);
  EXPECT_EQ(settled(file, PlanStrategy::File), PlanStrategy::File);
  EXPECT_EQ(settled(budget, PlanStrategy::Budget), PlanStrategy::Budget);
  auto refused = [&](const PlanSpec& spec, std::optional<PlanStrategy> named, bool given, const std::string& message) {
    try {
      settled(spec, named, given);
      ADD_FAILURE() << "not refused: " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  // A plan file and a budget (the CLI refused it, Python used to drop the budget).
  refused(file_budget, std::nullopt, false,
          "--budget params=0.8x is the input of strategy budget, not of strategy plan (implied by --plan p.json; give "
          "one of them)");
  refused(file, PlanStrategy::Random, false,
          "--plan p.json is the input of strategy plan, not of strategy random (drop --strategy, or use --strategy plan)");
  refused(budget, PlanStrategy::Score, false,
          "--budget params=0.8x is the input of strategy budget, not of strategy score (drop --strategy, or use "
          "--strategy budget)");
  refused(heads, std::nullopt, true,
          "--heads encoder_self:0:1 is the input of strategy manual, not of strategy given (implied by the plan given; "
          "give one of them)");
  refused(none, PlanStrategy::Score, true,
          "the plan given is the input of strategy given, not of strategy score (drop --strategy, or use --strategy given)");
}

TEST_P(Pruning, MaskedAndRemovedGiveIdenticalMetrics) {
  const ModelConfig cfg = test::config_of(GetParam());
  auto model = test::make_model(cfg, 5);
  const EvalSet set = synthetic_set(model->config(), 48);
  RandomPlanOptions ro;
  ro.target.fraction = 0.5;
  ro.seed = 9;
  const auto plan = plan_random(model->config(), ro);
  const std::vector<Metric> ms = {default_metric(cfg.arch), Metric::Loss};
  apply_plan_mask(*model, plan);
  const auto masked = measure(*model, set, ms);
  model->unmask_all();
  Transformer small = apply_plan_remove(*model, plan);
  // Each removed query head takes its Q rows (and bias) and its output-projection columns; each
  // key/value head left without query heads takes its K and V rows (with R = 1: every removed head).
  const int64_t C = cfg.d_model, D = model->config().head_dim, bias = cfg.qkv_bias ? D : 0;
  int64_t expected = 0;
  for (AttnType t : model->config().attn_types())
    for (int64_t l = 0; l < model->config().n_layers(t); ++l) {
      const HeadGeometry before = head_geometry(model->config(), t, l), after = head_geometry(small->config(), t, l);
      expected += (before.n_heads_kept() - after.n_heads_kept()) * (D * C + bias + C * D) +
                  static_cast<int64_t>(before.kv_heads().size() - after.kv_heads().size()) * 2 * (D * C + bias);
    }
  EXPECT_GT(expected, 0);
  EXPECT_EQ(model->n_parameters() - small->n_parameters(), expected);
  const auto removed = measure(*small, set, ms);
  for (Metric m : ms) EXPECT_NEAR(masked.at(m).value(), removed.at(m).value(), 1e-5) << to_string(m);
  // Every head of the model: still runs (every attention skipped).
  PruningPlan all;
  all.heads = kept_heads(model->config());
  Transformer none = apply_plan_remove(*model, all);
  EXPECT_NO_THROW(measure(*none, set, {Metric::Loss}));
}

INSTANTIATE_TEST_SUITE_P(Families, Pruning,
                         HP_ALL_FAMILIES);

TEST(Iterative, PrunesInStepsAndStopsAtTheMetricFloor) {
  const ModelConfig cfg = tiny_config(Arch::DecoderLM);
  auto model = test::make_model(cfg, 5);
  const EvalSet set = synthetic_set(model->config(), 32);
  IterativeOptions o;
  o.step = 0.25;
  o.target = 0.75;
  o.metric = Metric::Loss;
  const auto r = prune_iteratively(*model, set, set, o);
  ASSERT_EQ(r.steps.size(), 4u);  // 0, 2, 4, 6 of 8 heads
  for (size_t i = 0; i < r.steps.size(); ++i) EXPECT_EQ(r.steps[i].n_pruned, static_cast<int64_t>(2 * i));
  for (size_t i = 1; i < r.steps.size(); ++i)  // each step keeps the heads pruned before
    for (const auto& h : r.steps[i - 1].pruned)
      EXPECT_NE(std::find(r.steps[i].pruned.begin(), r.steps[i].pruned.end(), h), r.steps[i].pruned.end());
  EXPECT_EQ(r.plan.heads.size(), 6u);
  EXPECT_TRUE(model->masked_heads().empty());  // gates restored

  // A floor on the metric: the plan is the largest step that met it.
  o.min_metric_ratio = 0.999999;  // loss may rise by almost nothing
  const auto f = prune_iteratively(*model, set, set, o);
  const double base = f.steps.front().metric;
  for (const auto& st : f.steps) {
    if (st.n_pruned == static_cast<int64_t>(f.plan.heads.size())) {
      EXPECT_LE(st.metric, base / 0.999999);
    }
  }
  o.min_metric_ratio.reset();
  o.min_per_layer = 3;  // at most one head per layer can go
  EXPECT_EQ(prune_iteratively(*model, set, set, o).plan.heads.size(), 2u);
}

TEST(Iterative, UniformStepsKeepEveryLayerAlike) {
  const ModelConfig cfg = tiny_llama_config();  // grouped-query attention
  auto model = test::make_model(cfg, 5);
  const EvalSet set = synthetic_set(model->config(), 16);
  IterativeOptions o;
  o.step = 0.25;
  o.target = 0.5;
  o.shape = PlanShape::Uniform;
  const auto r = prune_iteratively(*model, set, set, o);
  ASSERT_GE(r.steps.size(), 2u);
  for (const auto& st : r.steps) {  // every step's pruned set leaves the same positions in every layer
    std::map<int64_t, int> per_layer;
    for (const auto& h : st.pruned) per_layer[h.layer]++;
    if (st.pruned.empty()) continue;
    EXPECT_EQ(static_cast<int64_t>(per_layer.size()), cfg.n_layers(AttnType::DecoderSelf));
    for (const auto& [l, n] : per_layer) EXPECT_EQ(n, per_layer.begin()->second) << l;
    EXPECT_EQ(st.n_pruned, static_cast<int64_t>(st.pruned.size()));
  }
  EXPECT_FALSE(r.plan.heads.empty());
  EXPECT_EQ(r.plan.strategy, "iterative:gradient:uniform");
  EXPECT_TRUE(model->masked_heads().empty());
}

TEST(Curve, StrategiesAndAttentionTypes) {
  set_log_level(LogLevel::Warn);
  const ModelConfig cfg = tiny_config(Arch::EncoderDecoder);
  auto model = test::make_model(cfg, 5);
  const EvalSet set = synthetic_set(model->config(), 24);
  CurveOptions o;
  o.fractions = {0, 0.5, 1.0};
  o.metric = Metric::Loss;
  for (const char* s : {"gradient", "iterative:gradient", "random:top", "magnitude@cross"})
    o.series.push_back(parse_curve_series(s));
  std::vector<std::string> skipped;
  o.on_skip = [&](const std::string& why) { skipped.push_back(why); };
  const auto pts = pruning_curve(*model, set, set, o);
  const double base = measure(*model, set, {Metric::Loss}).at(Metric::Loss).value();
  std::map<std::string, int> count;
  for (const auto& p : pts) {
    ++count[p.strategy];
    if (p.n_pruned == 0) {
      EXPECT_NEAR(p.metric, base, 1e-9) << p.strategy;
    }
    if (p.strategy == "magnitude@cross") {
      for (const auto& h : p.pruned) EXPECT_EQ(h.type, AttnType::Cross);
    }
  }
  EXPECT_EQ(count["gradient"], 3);
  EXPECT_EQ(count["iterative:gradient"], 3);
  EXPECT_EQ(count["random:top"], 2);  // the top layers cannot hold 100% of the heads
  EXPECT_EQ(skipped.size(), 1u);
  EXPECT_EQ(count["magnitude@cross"], 3);
  EXPECT_TRUE(model->masked_heads().empty());
  EXPECT_THROW(parse_curve_series("gradient:sideways"), std::invalid_argument);

  // With recovery fine-tuning every point also has a fine-tuned metric.
  TrainData td{synthetic_examples(model->config(), 64, 3, 10, 1), synthetic_examples(model->config(), 16, 3, 10, 2)};
  test::TempDir dir;
  CurveOptions ft;
  ft.fractions = {0.5};
  ft.metric = Metric::Loss;
  ft.series = {parse_curve_series("random")};
  ft.finetune_steps = 3;
  ft.finetune.batch_tokens = 256;
  ft.finetune.log_every = 100;
  ft.train = &td;
  ft.work_dir = dir.path;
  const auto fp = pruning_curve(*model, set, set, ft);
  ASSERT_EQ(fp.size(), 1u);
  ASSERT_TRUE(fp[0].metric_finetuned.has_value());
  EXPECT_TRUE(std::isfinite(*fp[0].metric_finetuned));
  set_log_level(LogLevel::Info);
}

TEST(Compensation, PerLayerMeansAndRatios) {
  HeadScores before, after;
  before.method = after.method = "gradient";
  before.scores = {{{AttnType::EncoderSelf, 0, 0}, 1.0}, {{AttnType::EncoderSelf, 0, 1}, 3.0},
                   {{AttnType::EncoderSelf, 1, 0}, 2.0}, {{AttnType::EncoderSelf, 1, 2}, 5.0}};
  after.scores = {{{AttnType::EncoderSelf, 0, 0}, 2.0}, {{AttnType::EncoderSelf, 0, 1}, 6.0},
                  {{AttnType::EncoderSelf, 1, 0}, 2.0}};  // head 1:2 pruned
  const auto c = compensation(before, after);
  ASSERT_EQ(c["layers"].size(), 2u);
  EXPECT_DOUBLE_EQ(c["layers"][0]["mean_before"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c["layers"][0]["mean_after"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(c["layers"][0]["ratio"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c["layers"][1]["ratio"].get<double>(), 1.0);
  EXPECT_EQ(c["heads"], 3);
  EXPECT_DOUBLE_EQ(c["total_ratio"].get<double>(), 10.0 / 6.0);
}

// Grouped-query attention: 2 layers of 4 query heads reading 2 key/value heads (group g = heads
// 2g and 2g + 1).
ModelConfig gqa_config() {
  ModelConfig c = tiny_llama_config();
  c.n_decoder_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.decoder_self_heads.clear();
  c.finalize();
  return c;
}

using test::error_of;

TEST(PlanUnits, GroupsGoWholeLeastImportantFirst) {
  const auto cfg = gqa_config();
  const AttnType T = AttnType::DecoderSelf;
  HeadScores g;
  g.method = "test";
  g.unit = ScoreUnit::KvGroup;
  g.scores = {{{T, 0, 0}, 5.0}, {{T, 0, 1}, 1.0}, {{T, 1, 0}, 3.0}, {{T, 1, 1}, 4.0}};
  ScorePlanOptions o;
  o.target.count = 1;
  EXPECT_EQ(plan_groups_by_score(g, cfg, o).heads, (std::vector<HeadId>{{T, 0, 2}, {T, 0, 3}}));
  o.target.count = 2;
  EXPECT_EQ(plan_groups_by_score(g, cfg, o).heads, (std::vector<HeadId>{{T, 0, 2}, {T, 0, 3}, {T, 1, 0}, {T, 1, 1}}));
  // Lower is more important: the order turns round.
  HeadScores inv = g;
  inv.higher_is_important = false;
  o.target.count = 1;
  EXPECT_EQ(plan_groups_by_score(inv, cfg, o).heads, (std::vector<HeadId>{{T, 0, 0}, {T, 0, 1}}));
  // Every group leaves 2 of 4 query heads: none can go while keeping 3 per layer.
  o.min_per_layer = 3;
  EXPECT_NE(error_of([&] { plan_groups_by_score(g, cfg, o); }).find("only 0 of the 1 groups"), std::string::npos);
  o.min_per_layer = 0;
  HeadScores heads = g;
  heads.unit = ScoreUnit::Head;
  EXPECT_NE(error_of([&] { plan_groups_by_score(heads, cfg, o); }).find("needs a key/value group map"), std::string::npos);
  HeadScores missing = g;
  missing.scores.erase({T, 1, 1});
  EXPECT_NE(error_of([&] { plan_groups_by_score(missing, cfg, o); }).find("has no score for group"), std::string::npos);
  HeadScores nan = g;
  nan.scores[{T, 1, 0}] = std::nan("");
  EXPECT_NE(error_of([&] { plan_groups_by_score(nan, cfg, o); }).find("1 groups are NaN or infinite"), std::string::npos);
}

TEST(PlanUnits, BalancedTakesOneHeadFromEveryGroupOfALayer) {
  const auto cfg = gqa_config();
  const AttnType T = AttnType::DecoderSelf;
  HeadScores s;
  s.method = "test";
  // Layer 0: the least important of group 0 is head 0 (1), of group 1 head 3 (2): a slice of 3.
  // Layer 1: heads 0 and 3 again (5 + 5 = 10). Layer 0's second slice (9 + 8) is above that.
  s.scores = {{{T, 0, 0}, 1.0}, {{T, 0, 1}, 9.0}, {{T, 0, 2}, 8.0}, {{T, 0, 3}, 2.0},
              {{T, 1, 0}, 5.0}, {{T, 1, 1}, 6.0}, {{T, 1, 2}, 7.0}, {{T, 1, 3}, 5.0}};
  ScorePlanOptions o;
  o.target.count = 2;
  EXPECT_EQ(plan_balanced_by_score(s, cfg, o).heads, (std::vector<HeadId>{{T, 0, 0}, {T, 0, 3}}));
  o.target.count = 4;
  EXPECT_EQ(plan_balanced_by_score(s, cfg, o).heads, (std::vector<HeadId>{{T, 0, 0}, {T, 0, 3}, {T, 1, 0}, {T, 1, 3}}));
  o.target.count = 3;  // steps of one head per group: never overshot
  EXPECT_EQ(plan_balanced_by_score(s, cfg, o).heads.size(), 2u);
  o.target.count = 4;
  o.min_per_layer = 3;  // a slice takes 2 of a layer's 4 heads
  EXPECT_TRUE(plan_balanced_by_score(s, cfg, o).heads.empty());
  o.min_per_layer = 0;
  o.per_layer = true;
  o.target = PruneTarget{0.5, std::nullopt};
  EXPECT_NE(error_of([&] { plan_balanced_by_score(s, cfg, o); }).find("per-layer targets are not supported"), std::string::npos);
  o.per_layer = false;
  HeadScores g = s;
  g.unit = ScoreUnit::KvGroup;
  EXPECT_NE(error_of([&] { plan_balanced_by_score(g, cfg, o); }).find("needs a query-head map"), std::string::npos);
  HeadScores nan = s;
  nan.scores[{T, 1, 2}] = std::nan("");
  EXPECT_NE(error_of([&] { plan_balanced_by_score(nan, cfg, o); }).find("1 heads are NaN or infinite"), std::string::npos);
}

TEST(PlanShapes, UniformKeepsTheSameGroupsAndHeadsInEveryLayerBySummedImportance) {
  const auto cfg = gqa_config();  // 2 layers of 4 query heads in 2 key/value groups
  const AttnType T = AttnType::DecoderSelf;
  HeadScores s;
  s.method = "test";
  // Group 1 is weak in both layers: removing it whole (importance 1 + 2, then 1 + 1) costs less than
  // removing one head from every group (5 + 1, then 6 + 1), which a balanced plan would do.
  s.scores = {{{T, 0, 0}, 5.0}, {{T, 0, 1}, 9.0}, {{T, 0, 2}, 1.0}, {{T, 0, 3}, 2.0},
              {{T, 1, 0}, 6.0}, {{T, 1, 1}, 7.0}, {{T, 1, 2}, 1.0}, {{T, 1, 3}, 1.0}};
  ScorePlanOptions o;
  o.target.count = 4;
  const auto p = plan_uniform_by_score(s, cfg, o);
  EXPECT_EQ(p.heads, (std::vector<HeadId>{{T, 0, 2}, {T, 0, 3}, {T, 1, 2}, {T, 1, 3}}));
  EXPECT_EQ(p.info.at("kept_per_layer").at("decoder_self").at("key_value_groups"), 1);
  EXPECT_EQ(p.info.at("kept_per_layer").at("decoder_self").at("query_heads_per_group"), 2);
  EXPECT_EQ(plan_balanced_by_score(s, cfg, o).heads, (std::vector<HeadId>{{T, 0, 0}, {T, 0, 2}, {T, 1, 0}, {T, 1, 2}}));
  o.target.count = 5;  // the next shape removes 6: never overshot
  EXPECT_EQ(plan_uniform_by_score(s, cfg, o).heads.size(), 4u);
  o.target.count = 6;  // one group of one head per layer: the most important head of the best group
  EXPECT_EQ(plan_uniform_by_score(s, cfg, o).heads,
            (std::vector<HeadId>{{T, 0, 0}, {T, 0, 2}, {T, 0, 3}, {T, 1, 0}, {T, 1, 2}, {T, 1, 3}}));
  o.target = PruneTarget{0.5, std::nullopt};  // a fraction of the 8 kept heads
  EXPECT_EQ(plan_uniform_by_score(s, cfg, o).heads.size(), 4u);
  o.target = PruneTarget{std::nullopt, 4};
  o.min_per_layer = 3;  // only the unpruned shape keeps 3 heads per layer
  EXPECT_TRUE(plan_uniform_by_score(s, cfg, o).heads.empty());
  o.min_per_layer = 0;
  o.exclude = {{T, 0, 0}};  // a model whose layer 0 already lost a head is uneven
  EXPECT_NE(error_of([&] { plan_uniform_by_score(s, cfg, o); }).find("already uneven"), std::string::npos);
  o.exclude = {{T, 0, 0}, {T, 0, 2}, {T, 1, 1}, {T, 1, 3}};  // one head per group in both layers: uniform
  EXPECT_EQ(plan_uniform_by_score(s, cfg, o).heads.size(), 2u);
  o.exclude.clear();
  o.per_layer = true;
  EXPECT_NE(error_of([&] { plan_uniform_by_score(s, cfg, o); }).find("per-layer targets do not apply"), std::string::npos);
  EXPECT_EQ(parse_plan_shape("uniform"), PlanShape::Uniform);
  EXPECT_EQ(parse_plan_shape("per_layer"), PlanShape::PerLayer);
}

// Per-layer counts before any score (what gates train to), and the cut that keeps exactly them.
TEST(PlanShapes, UniformCountsForATargetAndTheCutThatKeepsThem) {
  const auto cfg = gqa_config();  // 2 layers of 4 query heads in 2 groups: a layer keeps 1, 2 or 4
  const AttnType T = AttnType::DecoderSelf;
  using Counts = std::map<AttnType, int64_t>;
  EXPECT_EQ(uniform_kept_per_layer(cfg, 0, 1), (Counts{{T, 4}}));
  EXPECT_EQ(uniform_kept_per_layer(cfg, 3, 1), (Counts{{T, 4}}));  // 2 per layer would remove 4
  EXPECT_EQ(uniform_kept_per_layer(cfg, 5, 1), (Counts{{T, 2}}));
  EXPECT_EQ(uniform_kept_per_layer(cfg, 8, 1), (Counts{{T, 1}}));  // never a layer without heads
  EXPECT_EQ(uniform_kept_per_layer(cfg, 8, 2), (Counts{{T, 2}}));
  EXPECT_EQ(uniform_heads_kept(cfg, {{T, 2}}), 4);
  HeadScores s;
  s.method = "test";
  s.scores = {{{T, 0, 0}, 5.0}, {{T, 0, 1}, 9.0}, {{T, 0, 2}, 1.0}, {{T, 0, 3}, 2.0},
              {{T, 1, 0}, 6.0}, {{T, 1, 1}, 7.0}, {{T, 1, 2}, 1.0}, {{T, 1, 3}, 1.0}};
  const Counts two{{T, 2}};
  const auto p = plan_uniform_by_score(s, cfg, ScorePlanOptions{}, &two);  // no target: the counts decide
  EXPECT_EQ(p.heads, (std::vector<HeadId>{{T, 0, 2}, {T, 0, 3}, {T, 1, 2}, {T, 1, 3}}));
  const Counts three{{T, 3}};
  EXPECT_NE(error_of([&] { plan_uniform_by_score(s, cfg, ScorePlanOptions{}, &three); }).find("keeps exactly 3 heads per layer"),
            std::string::npos);
  // Three stacks (encoder-decoder): the most removed within the target, the stacks' fractions as even
  // as possible at a tie.
  ModelConfig ed = tiny_config(Arch::EncoderDecoder);  // 2 layers of 4 heads per stack
  const auto even = uniform_kept_per_layer(ed, 12, 1);
  EXPECT_EQ(uniform_heads_kept(ed, even), 24 - 12);
  for (const auto& [t, k] : even) EXPECT_EQ(k, 2) << to_string(t);
}

// Relative positions (T5): one count for every stack, and in a self-attention stack the same head ids in
// every layer, judged by their importance summed over the layers.
TEST(PlanShapes, RelativePositionsKeepTheSameHeadIdsInEverySelfAttentionLayer) {
  ModelConfig cfg = tiny_config(Arch::EncoderDecoder);  // 2 layers of 4 heads per stack
  cfg.positional = Positional::Relative;
  cfg.finalize();
  HeadScores s;
  s.method = "test";
  std::mt19937 rng(7);
  for (const auto& h : kept_heads(cfg, {})) s.scores[h] = std::uniform_real_distribution<double>(0, 1)(rng);
  // Encoder head 3 is weak in layer 0 but strong in layer 1; head 2 weak in both: head 2 goes, in both layers.
  const AttnType E = AttnType::EncoderSelf;
  s.scores[{E, 0, 0}] = 5, s.scores[{E, 1, 0}] = 5, s.scores[{E, 0, 1}] = 4, s.scores[{E, 1, 1}] = 4;
  s.scores[{E, 0, 2}] = 0.2, s.scores[{E, 1, 2}] = 0.2, s.scores[{E, 0, 3}] = 0.1, s.scores[{E, 1, 3}] = 9;
  ScorePlanOptions o;
  o.target.count = 6;  // one head of each of the 6 layers
  const auto p = plan_uniform_by_score(s, cfg, o);
  std::map<AttnType, std::set<int64_t>> ids;
  std::map<AttnType, int> n;
  for (const auto& h : p.heads) ids[h.type].insert(h.head), ++n[h.type];
  EXPECT_EQ(n, (std::map<AttnType, int>{{E, 2}, {AttnType::DecoderSelf, 2}, {AttnType::Cross, 2}}));
  EXPECT_EQ(ids[E], (std::set<int64_t>{2}));
  EXPECT_EQ(ids[AttnType::DecoderSelf].size(), 1u);
  o.target.count = 5;  // no shape removes 5 with one count for every stack: nothing
  EXPECT_TRUE(plan_uniform_by_score(s, cfg, o).heads.empty());
}

TEST(PlanShapes, RandomUniformPlansAreUniformSeededAndVaried) {
  const auto cfg = gqa_config();  // 2 layers of 4 query heads in 2 key/value groups
  RandomPlanOptions o;
  o.target.count = 4;
  o.shape = PlanShape::Uniform;
  std::set<std::vector<HeadId>> seen;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    o.seed = seed;
    const auto p = plan_random(cfg, o);
    ASSERT_EQ(p.heads.size(), 4u);
    EXPECT_EQ(p.strategy, "random:shape_uniform");
    // Every layer loses the same positions' worth: as many heads from each layer, the same shape.
    std::map<int64_t, int> per_layer;
    for (const auto& h : p.heads) per_layer[h.layer]++;
    EXPECT_EQ(per_layer, (std::map<int64_t, int>{{0, 2}, {1, 2}}));
    EXPECT_EQ(plan_random(cfg, o).heads, p.heads);  // seeded
    seen.insert(p.heads);
  }
  EXPECT_GT(seen.size(), 4u);  // the heads differ between seeds
  o.layers = LayerChoice::Top;
  EXPECT_NE(test::error_of([&] { plan_random(cfg, o); }).find("does not apply"), std::string::npos);
}

}  // namespace
}  // namespace hp
