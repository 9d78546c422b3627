// Pruning to a budget: parsing, counted costs against the pruned models' real sizes, the knapsack
// against brute force, emptied layers as a unit, the measured latency table's shape.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "headprune/prune/budget.h"
#include "test_util.h"

namespace hp {
namespace {

// A latency table's shape that times in milliseconds: batch 1 x 8 tokens, one warm-up, three rounds
// (no least time per model).
BudgetShape quick_shape() {
  BudgetShape shape;
  shape.batch = 1;
  shape.seq_len = 8;
  shape.warmup = 1;
  shape.reps = 3;
  shape.min_seconds = 0;
  return shape;
}

// A key/value group importance map over the table's groups, each group's score from `score()` in table order.
HeadScores group_scores(const CostTable& t, const std::function<double()>& score) {
  HeadScores s;
  s.method = "test";
  s.unit = ScoreUnit::KvGroup;
  for (const auto& l : t.layers)
    for (const auto& g : l.groups) s.scores[g] = score();
  return s;
}

TEST(Budget, ParsesSharesAndUnits) {
  auto b = parse_budget("latency=0.7x");
  EXPECT_EQ(b.kind, BudgetKind::Latency);
  EXPECT_TRUE(b.relative);
  EXPECT_DOUBLE_EQ(b.value, 0.7);
  b = parse_budget("latency=12.5ms");
  EXPECT_FALSE(b.relative);
  EXPECT_DOUBLE_EQ(b.value, 12.5);
  EXPECT_DOUBLE_EQ(parse_budget("memory=1.5GiB").value, 1.5 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_budget("kv-cache=300MB").value, 300e6);
  EXPECT_EQ(parse_budget("kv_cache=50%").kind, BudgetKind::KvCache);
  EXPECT_DOUBLE_EQ(parse_budget("kv_cache=50%").value, 0.5);
  EXPECT_DOUBLE_EQ(parse_budget("params=80M").value, 80e6);
  EXPECT_DOUBLE_EQ(parse_budget("params=12345").value, 12345);
  EXPECT_DOUBLE_EQ(parse_budget("memory=4096").value, 4096);
  for (const char* bad : {"latency", "latency=12", "speed=0.5x", "params=-3M", "memory=1.5x", "params=abcM", "latency=0x"})
    EXPECT_THROW(parse_budget(bad), std::invalid_argument) << bad;
  EXPECT_NE(test::error_of([] { parse_budget("latency=12"); }).find("milliseconds"), std::string::npos);
}

// A group plan: for each layer of the table, drop its groups from position kept[i] on.
std::vector<HeadId> heads_of(const ModelConfig& cfg, const CostTable& t, const std::vector<int64_t>& kept) {
  std::vector<HeadId> out;
  for (size_t i = 0; i < t.layers.size(); ++i)
    for (size_t g = static_cast<size_t>(kept[i]); g < t.layers[i].groups.size(); ++g) {
      const auto& grp = t.layers[i].groups[g];
      const auto geo = head_geometry(cfg, grp.type, grp.layer);
      for (auto h : geo.heads)
        if (h / geo.group_size == grp.head) out.push_back({grp.type, grp.layer, h});
    }
  return out;
}

class CountedCosts : public ::testing::TestWithParam<test::Fam> {};

TEST_P(CountedCosts, PredictTheSizeOfThePrunedModel) {
  auto model = test::make_model(GetParam(), 3);
  const auto& cfg = model->config();
  BudgetShape shape;
  shape.batch = 2;
  shape.context = 64;
  const auto params = counted_costs(*model, BudgetKind::Params, shape);
  EXPECT_EQ(params.full, static_cast<double>(model->n_parameters()));
  const auto memory = counted_costs(*model, BudgetKind::Memory, shape);
  const bool caches = cfg.arch != Arch::EncoderClassifier;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<int64_t> kept;
    for (const auto& l : params.layers)
      kept.push_back(std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(l.groups.size()))(rng));
    kept[0] = 0;  // an emptied layer among them
    auto pruned = remove_heads(*model, heads_of(cfg, params, kept));
    EXPECT_EQ(params.predict(kept), static_cast<double>(pruned->n_parameters()));
    EXPECT_EQ(counted_costs(*pruned, BudgetKind::Params, shape).full, params.predict(kept));
    EXPECT_EQ(counted_costs(*pruned, BudgetKind::Memory, shape).full, memory.predict(kept));
    if (caches) {
      EXPECT_EQ(counted_costs(*pruned, BudgetKind::KvCache, shape).full,
                counted_costs(*model, BudgetKind::KvCache, shape).predict(kept));
    }
  }
  if (!caches) {
    EXPECT_NE(test::error_of([&] { counted_costs(*model, BudgetKind::KvCache, shape); }).find("no key/value cache"),
              std::string::npos);
    return;
  }
  // The cache by hand: keys and values of every kept key/value head of every caching layer.
  const auto kv = counted_costs(*model, BudgetKind::KvCache, shape);
  double by_hand = 0;
  for (auto t : cfg.attn_types()) {
    if (t == AttnType::EncoderSelf) continue;
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) {
      const auto geo = head_geometry(cfg, t, l);
      by_hand += 2.0 * 2 * 64 * static_cast<double>(geo.head_dim * geo.n_kv_heads_kept()) * 4;
    }
  }
  EXPECT_EQ(kv.full, by_hand);
  EXPECT_EQ(memory.full, params.full * 4 + kv.full);
}

INSTANTIATE_TEST_SUITE_P(Families, CountedCosts, HP_ALL_FAMILIES);

// The encoder classifier both knapsack tests build their tables from: 3 layers.
ModelConfig three_layer_encoder() {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_encoder_layers = 3;
  cfg.encoder_self_heads.clear();
  cfg.n_classes = 2;
  cfg.finalize();
  return cfg;
}

// A hand-made table of 3 layers: groups ranked by a map; brute force over every count per layer.
TEST(BudgetKnapsack, MatchesBruteForceAndEmptiesLayers) {
  const ModelConfig cfg = three_layer_encoder();
  auto model = test::make_model(cfg, 1);
  const int64_t H = cfg.n_heads;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    CostTable t = counted_costs(*model, BudgetKind::Params, {});
    // Latency-like costs: a step for having any head at all, then a little per head.
    for (auto& l : t.layers)
      for (size_t c = 0; c <= l.groups.size(); ++c) l.cost[c] = c == 0 ? 0.0 : 1.0 + u(rng) + 0.1 * static_cast<double>(c);
    t.full = 2.0;
    for (const auto& l : t.layers) t.full += l.cost.back();
    const HeadScores s = group_scores(t, [&] { return u(rng); });
    const double limit = t.emptied() + u(rng) * (t.full - t.emptied());
    const auto bp = plan_to_budget(t, s, cfg, limit);
    EXPECT_LE(bp.predicted, limit);
    // Brute force: the best importance for each choice of counts (the most important groups kept).
    auto value = [&](size_t i, int64_t c) {
      std::vector<double> v;
      for (const auto& g : t.layers[i].groups) v.push_back(s.at(g));
      std::sort(v.rbegin(), v.rend());
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) sum += v[static_cast<size_t>(k)];
      return sum;
    };
    double best = -1, best_slack = -1;
    const double slack = 3 * (limit - t.emptied()) / 4000.0;  // costs are rounded up by under a bin per layer
    std::vector<int64_t> k(3);
    for (k[0] = 0; k[0] <= H; ++k[0])
      for (k[1] = 0; k[1] <= H; ++k[1])
        for (k[2] = 0; k[2] <= H; ++k[2]) {
          const double cost = t.predict(k), v = value(0, k[0]) + value(1, k[1]) + value(2, k[2]);
          if (cost <= limit) best = std::max(best, v);
          if (cost <= limit - slack) best_slack = std::max(best_slack, v);
        }
    EXPECT_LE(bp.importance_kept, best + 1e-12);
    EXPECT_GE(bp.importance_kept, best_slack - 1e-12);
    // The plan removes each layer's least important groups, every head of an emptied layer included.
    for (const auto& h : bp.plan.heads)
      for (const auto& g : t.layers[static_cast<size_t>(h.layer)].groups) {
        const bool gone = std::find(bp.plan.heads.begin(), bp.plan.heads.end(), HeadId{g.type, g.layer, g.head}) !=
                          bp.plan.heads.end();
        if (!gone) {
          EXPECT_GE(s.at(g), s.at(HeadId{h.type, h.layer, h.head}));
        }
      }
    int64_t removed = 0;
    for (size_t i = 0; i < 3; ++i) removed += H - bp.kept[i];
    EXPECT_EQ(static_cast<int64_t>(bp.plan.heads.size()), removed);
  }
  // A limit below every layer emptied says the least this model can cost.
  CostTable t = counted_costs(*model, BudgetKind::Params, {});
  const HeadScores s = group_scores(t, [] { return 1.0; });
  EXPECT_NE(test::error_of([&] { plan_to_budget(t, s, cfg, t.emptied() - 1); }).find("every attention layer emptied"),
            std::string::npos);
  // With a limit that leaves room for one layer only, the other two are emptied whole.
  auto one = plan_to_budget(t, s, cfg, t.emptied() + t.layers[0].cost.back() + 0.5);
  int64_t emptied = 0;
  for (auto k : one.kept) emptied += k == 0;
  EXPECT_EQ(emptied, 2);
}

// Uniform: every layer keeps the same count, the best count that fits (brute force over the counts).
TEST(BudgetKnapsack, UniformKeepsTheSameCountInEveryLayer) {
  const ModelConfig cfg = three_layer_encoder();
  auto model = test::make_model(cfg, 1);
  const int64_t H = cfg.n_heads;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const CostTable t = counted_costs(*model, BudgetKind::Params, {});
  for (int trial = 0; trial < 10; ++trial) {
    const HeadScores s = group_scores(t, [&] { return u(rng); });
    const double limit = t.predict(std::vector<int64_t>(3, 1)) + u(rng) * (t.full - t.predict(std::vector<int64_t>(3, 1)));
    const auto bp = plan_to_budget(t, s, cfg, limit, PlanShape::Uniform);
    EXPECT_LE(bp.predicted, limit);
    EXPECT_EQ(bp.kept, std::vector<int64_t>(3, bp.kept[0]));
    int64_t fits = 0;  // the largest count that fits: params grow with the count
    for (int64_t c = 1; c <= H; ++c)
      if (t.predict(std::vector<int64_t>(3, c)) <= limit) fits = c;
    EXPECT_EQ(bp.kept[0], fits);
    EXPECT_EQ(static_cast<int64_t>(bp.plan.heads.size()), 3 * (H - fits));
  }
  EXPECT_NE(test::error_of([&] {
              plan_to_budget(t, group_scores(t, [] { return 1.0; }), cfg, t.predict(std::vector<int64_t>(3, 1)) - 1,
                             PlanShape::Uniform);
            }).find("no uniform model fits"),
            std::string::npos);
}

TEST(BudgetLatency, TheLineThroughTheTableKeepsTheEmptiedModelAndStopsTheKnapsackChasingADip) {
  // A line stays a line; T[0] (every layer emptied) is never moved; short tables are returned as they are.
  const std::vector<double> line = {40, 52, 55, 58, 61, 64};
  EXPECT_EQ(fit_kept_line(line), line);
  EXPECT_EQ(fit_kept_line({3, 5, 9}), (std::vector<double>{3, 5, 9}));
  // Timing noise made c = 3 look cheap: the fit is the least-squares line through c = 1 .. 5.
  const std::vector<double> noisy = {40, 52, 55, 53, 61, 64};
  const auto f = fit_kept_line(noisy);
  ASSERT_EQ(f.size(), noisy.size());
  EXPECT_EQ(f[0], 40.0);
  double sum = 0, sum_fit = 0;
  for (size_t c = 1; c < f.size(); ++c) sum += noisy[c], sum_fit += f[c];
  EXPECT_NEAR(sum_fit, sum, 1e-9);  // least squares with an intercept: the residuals sum to zero
  for (size_t c = 2; c < f.size(); ++c) EXPECT_NEAR(f[c] - f[c - 1], f[2] - f[1], 1e-9);
  EXPECT_NEAR(f[2] - f[1], 3.0, 1e-9);  // slope of (1,52) (2,55) (3,53) (4,61) (5,64)
  // Two layers of five groups with equal importance and the room of both keeping the dip's count: on the
  // measured table the knapsack keeps 3 and 3; on the line that costs more than the room, and it keeps
  // all of one layer and empties the other.
  ModelConfig cfg = tiny_config(Arch::DecoderLM);
  cfg.n_decoder_layers = 2;
  cfg.n_heads = 5;
  cfg.d_model = 40;
  cfg.decoder_self_heads.clear();
  cfg.finalize();
  auto model = test::make_model(cfg, 2);
  CostTable t = counted_costs(*model, BudgetKind::Params, {});
  ASSERT_EQ(t.layers.size(), 2u);
  ASSERT_EQ(t.layers[0].groups.size(), 5u);
  const HeadScores s = group_scores(t, [] { return 1.0; });
  auto kept_on = [&](const std::vector<double>& T) {
    t.full = T.back();
    for (auto& l : t.layers) {
      l.cost.clear();
      for (double x : T) l.cost.push_back((x - T[0]) / 2);
    }
    return plan_to_budget(t, s, cfg, noisy[3]).kept;  // the room of both layers at the dip
  };
  EXPECT_EQ(kept_on(noisy), (std::vector<int64_t>{3, 3}));
  auto on_line = kept_on(f);
  std::sort(on_line.begin(), on_line.end());
  EXPECT_EQ(on_line, (std::vector<int64_t>{0, 5}));
}

TEST(BudgetLatency, TableHasEveryCountAndRefusesUnlikeLayers) {
  ModelConfig cfg = tiny_config(Arch::DecoderLM);
  cfg.n_decoder_layers = 2;
  cfg.decoder_self_heads.clear();
  cfg.finalize();
  auto model = test::make_model(cfg, 2);
  const BudgetShape shape = quick_shape();
  const auto t = latency_costs(*model, shape);
  ASSERT_EQ(t.layers.size(), 2u);
  for (const auto& l : t.layers) {
    ASSERT_EQ(l.cost.size(), static_cast<size_t>(cfg.n_heads + 1));
    EXPECT_EQ(l.cost[0], 0.0);
  }
  EXPECT_GT(t.full, 0.0);
  EXPECT_EQ(t.measured.at("model_ms").at("decoder_self").size(), static_cast<size_t>(cfg.n_heads + 1));
  std::vector<int64_t> all = {cfg.n_heads, cfg.n_heads};
  EXPECT_DOUBLE_EQ(t.predict(all), t.full);
  auto pruned = remove_heads(*model, {{AttnType::DecoderSelf, 0, 1}});
  EXPECT_NE(test::error_of([&] { latency_costs(*pruned, shape); }).find("different numbers"), std::string::npos);
  model->set_head_mask({AttnType::DecoderSelf, 0, 1}, 0.0);
  EXPECT_NE(test::error_of([&] { latency_costs(*model, shape); }).find("masked heads"), std::string::npos);
}

TEST(BudgetCheck, LatencyCheckTimesBothModelsAndReportsTheDriftFromTheTable) {
  auto model = test::make_model(test::Fam::Llama, 4);
  const BudgetShape shape = quick_shape();
  const auto t = latency_costs(*model, shape);
  double x = 0;
  const HeadScores s = group_scores(t, [&] { return x += 1; });
  auto bp = plan_to_budget(t, s, model->config(), t.emptied() + 0.5 * (t.full - t.emptied()));
  bp.plan.info["budget"] = parse_budget("latency=0.9x").to_json();
  auto pruned = remove_heads(*model, bp.plan.heads);
  const auto check = check_budget(*model, *pruned, bp.plan, shape);
  const double unpruned = check.at("measured_unpruned").get<double>();
  EXPECT_GT(unpruned, 0.0);
  EXPECT_GT(check.at("measured").get<double>(), 0.0);
  EXPECT_NEAR(check.at("drift").get<double>(), unpruned / t.full - 1.0, 1e-12);
  EXPECT_NEAR(check.at("predicted_share").get<double>(), bp.predicted / t.full, 1e-12);
  EXPECT_NEAR(check.at("share_error").get<double>(),
              check.at("predicted_share").get<double>() / check.at("measured_share").get<double>() - 1.0, 1e-12);
  EXPECT_EQ(check.at("met").get<bool>(), check.at("measured_share").get<double>() <= 0.9);
}

TEST(BudgetCheck, CountedBudgetsAreRecountedOnThePrunedModel) {
  auto model = test::make_model(test::Fam::Llama, 4);
  const auto t = counted_costs(*model, BudgetKind::Params, {});
  double x = 0;
  const HeadScores s = group_scores(t, [&] { return x += 1; });
  auto bp = plan_to_budget(t, s, model->config(), 0.8 * t.full);
  bp.plan.info["budget"] = parse_budget("params=0.8x").to_json();
  auto pruned = remove_heads(*model, bp.plan.heads);
  const auto check = check_budget(*model, *pruned, bp.plan, {});
  EXPECT_EQ(check.at("measured").get<double>(), static_cast<double>(pruned->n_parameters()));
  EXPECT_EQ(check.at("error").get<double>(), 0.0);
  EXPECT_TRUE(check.at("met").get<bool>());
  EXPECT_LE(static_cast<double>(pruned->n_parameters()), 0.8 * t.full);
}

}  // namespace
}  // namespace hp
