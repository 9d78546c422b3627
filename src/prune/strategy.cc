// Plans from a strategy request (see header).
#include "headprune/prune/strategy.h"

#include "headprune/prune/budget.h"

#include <sstream>
#include <stdexcept>

namespace hp {

const OptionTable<PlanSpec>& plan_option_table() {
  using P = PlanSpec;
  using R = ValueRange;
  static const OptionTable<P> t =
      OptionTable<P>()
          .parsed("method", "--method", "scoring method for score and iterative",
                  [](P& p, const std::string& s) { p.method = parse_score_method(s); }, "gradient")
          .parsed("target", "--target", "how many heads: a fraction (0.3 or 30%) or a count (12)",
                  [](P& p, const std::string& s) { p.target = parse_target(s); }, "")
          .yes_no("per_layer", "--per-layer", "score: the target fraction of every layer instead of globally",
                  &P::per_layer, FlagStyle::Sets)
          .parsed("unit", "--unit",
                  "score, grouped-query attention: head (query heads), group (whole key/value groups; the target "
                  "counts groups) or balanced (as many query heads from every group of a layer)",
                  [](P& p, const std::string& s) { p.unit = parse_plan_unit(s); }, "head")
          .parsed("shape", "--shape",
                  "per-layer (any count in any layer) or uniform (score: every layer keeps the same key/value groups "
                  "and query heads per group, chosen by summed importance: an ordinary smaller model that export --hf "
                  "writes natively; iterative: every step such a plan of the re-scored model; budget: whole key/value groups, "
                  "as many in every layer; random: the same shape with heads drawn at random, its baseline)",
                  [](P& p, const std::string& s) { p.shape = parse_plan_shape(s); }, "per-layer")
          .integer("min_per_layer", "--min-per-layer", "keep at least this many heads in every layer", &P::min_per_layer,
                   R::at_least(0))
          .parsed("layer_strategy", "--layer-strategy", "random: uniform, avoid_middle, avoid_consecutive, top, bottom",
                  [](P& p, const std::string& s) { p.layer_strategy = parse_layer_choice(s); }, "uniform")
          .real("step", "--step", "iterative: fraction of the heads pruned per step", &P::step, R::between(0, 1, true))
          .parsed("min_ratio", "--min-ratio", "iterative: stop before the metric falls below this fraction of the start",
                  [](P& p, const std::string& s) {
                    p.min_ratio = parse_finite_number(s);
                    if (!p.min_ratio) throw std::invalid_argument("expected a finite number, got '" + s + "'");
                  },
                  "")
          .text("heads", "--heads", "manual: TYPE:LAYER:HEAD,... or HF's {\"layer\": [heads]} JSON; implies --strategy manual",
                &P::heads, false)
          .parsed("hf_type", "--hf-type", "manual, HF form: the attention type its layers refer to",
                  [](P& p, const std::string& s) { p.hf_type = parse_attn_type(s); }, "")
          .parsed("layers", "--layers", "layers: TYPE:LAYER,... whole attention layers",
                  [](P& p, const std::string& s) { p.layers = parse_layer_list(s); }, "")
          .text("plan_file", "--plan", "a plan JSON (an earlier prune's plan.json); implies --strategy plan", &P::plan_file,
                false)
          .text("scores_file", "--scores",
                "score: take the --method map from this importance.json (headprune importance --out) instead of "
                "scoring again",
                &P::scores_file, false)
          .text("budget", "--budget",
                "budget: latency=0.7x or =12ms (measured here), memory=2GiB or =0.8x (weights and key/value cache), "
                "kv-cache=..., params=0.75x or =80M; the plan keeps the most --method importance within it (implies "
                "--strategy budget)",
                &P::budget, false);
  return t;
}

const NameTable<PlanStrategy>& plan_strategy_names() {
  static const NameTable<PlanStrategy> t{"strategy",
                                         {{PlanStrategy::Score, {"score"}},
                                          {PlanStrategy::Iterative, {"iterative"}},
                                          {PlanStrategy::Random, {"random"}},
                                          {PlanStrategy::Layers, {"layers"}},
                                          {PlanStrategy::Manual, {"manual"}},
                                          {PlanStrategy::File, {"plan"}},
                                          {PlanStrategy::Given, {"given"}},
                                          {PlanStrategy::Budget, {"budget"}}}};
  return t;
}

PlanStrategy parse_plan_strategy(const std::string& s) { return plan_strategy_names().parse(s); }

namespace {

// The inputs that belong to one strategy each, in the order they imply it.
struct StrategyInput {
  PlanStrategy strategy;
  bool present;
  std::string what;  // as the CLI spells it
};

std::vector<StrategyInput> strategy_inputs(const PlanSpec& spec, bool given) {
  return {{PlanStrategy::File, !spec.plan_file.empty(), "--plan " + spec.plan_file},
          {PlanStrategy::Budget, !spec.budget.empty(), "--budget " + spec.budget},
          {PlanStrategy::Given, given, "the plan given"},
          {PlanStrategy::Manual, !spec.heads.empty(), "--heads " + spec.heads}};
}

// An input of another strategy than spec.strategy: refused naming both; `chosen_by` says why
// spec.strategy is the strategy ("" when it was named).
void check_strategy_inputs(const PlanSpec& spec, bool given, const std::string& chosen_by) {
  const auto& names = plan_strategy_names();
  for (const auto& in : strategy_inputs(spec, given))
    if (in.present && in.strategy != spec.strategy)
      throw std::invalid_argument(in.what + " is the input of strategy " + names.name(in.strategy) + ", not of strategy " +
                                  names.name(spec.strategy) + " (" +
                                  (chosen_by.empty() ? "drop --strategy, or use --strategy " + names.name(in.strategy)
                                                     : "implied by " + chosen_by + "; give one of them") +
                                  ")");
}

}  // namespace

void settle_plan_strategy(PlanSpec& spec, std::optional<PlanStrategy> named, bool given) {
  std::string chosen_by;
  if (named) {
    spec.strategy = *named;
  } else {
    spec.strategy = PlanStrategy::Score;
    for (const auto& in : strategy_inputs(spec, given))
      if (in.present) {
        spec.strategy = in.strategy;
        chosen_by = in.what;
        break;
      }
  }
  check_strategy_inputs(spec, given, chosen_by);
}

std::vector<std::pair<AttnType, int64_t>> parse_layer_list(const std::string& s) {
  std::vector<std::pair<AttnType, int64_t>> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto c = item.rfind(':');
    if (c == std::string::npos) throw std::invalid_argument("layers: '" + item + "' is not TYPE:LAYER");
    const AttnType type = parse_attn_type(item.substr(0, c));
    const std::string num = item.substr(c + 1);
    int64_t layer = -1;
    try {
      size_t used = 0;
      layer = std::stoll(num, &used);
      if (used != num.size()) layer = -1;
    } catch (const std::logic_error&) {
    }
    if (layer < 0) throw std::invalid_argument("layers: '" + item + "' is not TYPE:LAYER (LAYER a number >= 0)");
    out.push_back({type, layer});
  }
  return out;
}

namespace {

// The importance map a score-based plan ranks by: scored now on `data`, or read from spec.scores_file.
HeadScores plan_scores(const PlanSpec& spec, TransformerImpl& model, const EvalSet& data, const ScoreOptions& score,
                       ScoreUnit unit) {
  if (spec.scores_file.empty()) {
    ScoreOptions so = score;
    so.unit = unit;
    return score_heads(model, data, spec.method, so);
  }
  std::string have;
  for (auto& m : read_maps(spec.scores_file)) {
    if (m.method == to_string(spec.method) && m.unit == unit) return m;
    have += (have.empty() ? "" : ", ") + m.method + (m.unit == ScoreUnit::KvGroup ? " (kv_group)" : "");
  }
  throw std::invalid_argument(spec.scores_file + ": no " + to_string(spec.method) + " map of " +
                              (unit == ScoreUnit::KvGroup ? "key/value groups" : "query heads") + " (it has " +
                              (have.empty() ? "none" : have) + ")");
}

// Strategy budget: the group map, the cost table (measured or counted), the knapsack.
PruningPlan budget_plan(const PlanSpec& spec, TransformerImpl& model, const EvalSet& data, const ScoreOptions& score) {
  if (spec.budget.empty())
    throw std::invalid_argument("strategy budget needs a budget (--budget latency=0.7x, memory=2GiB, kv-cache=0.5x or params=0.8x)");
  const Budget b = parse_budget(spec.budget);
  const HeadScores groups = plan_scores(spec, model, data, score, ScoreUnit::KvGroup);
  std::function<void(int64_t, int64_t)> progress;
  if (score.progress) progress = [&](int64_t done, int64_t total) { score.progress("latency table", done, total); };
  const CostTable table = b.kind == BudgetKind::Latency ? latency_costs(model, spec.budget_shape, progress)
                                                        : counted_costs(model, b.kind, spec.budget_shape);
  const double limit = b.relative ? b.value * table.full : b.value;
  // A measured budget is aimed a margin below, so that the check's timing noise does not cross it.
  const double aim = b.kind == BudgetKind::Latency ? limit * (1.0 - spec.budget_shape.margin) : limit;
  BudgetPlan bp = plan_to_budget(table, groups, model.config(), aim, spec.shape);
  if (spec.shape == PlanShape::Uniform) bp.plan.strategy += ":uniform", bp.plan.info["shape"] = "uniform";
  bp.plan.info["limit"] = limit;
  bp.plan.info["aimed_at"] = aim;
  bp.plan.info["budget"] = b.to_json();
  return bp.plan;
}

PruningPlan unchecked_plan(const PlanSpec& spec, TransformerImpl& model, const EvalSet& data, const ScoreOptions& score,
                           const MetricOptions& measure, Metric metric,
                           const std::function<void(const PrunePoint&)>& on_step) {
  const ModelConfig& cfg = model.config();
  const std::string name = plan_strategy_names().name(spec.strategy);
  check_strategy_inputs(spec, spec.strategy == PlanStrategy::Given, "");
  if (spec.shape == PlanShape::Uniform && spec.strategy != PlanStrategy::Score && spec.strategy != PlanStrategy::Random &&
      spec.strategy != PlanStrategy::Iterative && spec.strategy != PlanStrategy::Budget)
    throw std::invalid_argument("--shape uniform is built into strategies score, random, iterative and budget so far, "
                                "not into strategy " + name + " (a constraint of the choice, not a rounding after it); "
                                "use --strategy score");
  switch (spec.strategy) {
    case PlanStrategy::Given: return spec.given;
    case PlanStrategy::File:
      if (spec.plan_file.empty()) throw std::invalid_argument("strategy plan needs a plan file (--plan FILE)");
      return read_plan(spec.plan_file);
    case PlanStrategy::Manual:
      if (spec.heads.empty()) throw std::invalid_argument("strategy manual needs heads (--heads TYPE:LAYER:HEAD,...)");
      return plan_manual(spec.heads, cfg, spec.hf_type);
    case PlanStrategy::Layers:
      if (spec.layers.empty()) throw std::invalid_argument("strategy layers needs layers (--layers TYPE:LAYER[,...])");
      return plan_layers(cfg, spec.layers);
    case PlanStrategy::Budget: return budget_plan(spec, model, data, score);
    default: break;
  }
  if (!spec.target) throw std::invalid_argument("strategy " + name + " needs a target (--target 0.3, 30% or a count)");
  const auto masked = model.masked_heads();
  if (spec.unit != PlanUnit::Head && spec.strategy != PlanStrategy::Score)
    throw std::invalid_argument("--unit " + to_string(spec.unit) + " is for strategy score (got " + name + ")");
  if (spec.strategy == PlanStrategy::Random) {
    RandomPlanOptions ro;
    ro.target = *spec.target;
    ro.layers = spec.layer_strategy;
    ro.seed = spec.seed;
    ro.exclude = masked;
    ro.shape = spec.shape;
    return plan_random(cfg, ro);
  }
  if (spec.strategy == PlanStrategy::Iterative) {
    if (!spec.target->fraction) throw std::invalid_argument("strategy iterative: the target must be a fraction");
    IterativeOptions io;
    io.step = spec.step;
    io.target = *spec.target->fraction;
    io.min_metric_ratio = spec.min_ratio;
    io.min_per_layer = spec.min_per_layer;
    io.method = spec.method;
    io.score = score;
    io.metric = metric;
    io.measure = measure;
    io.on_step = on_step;
    io.shape = spec.shape;
    return prune_iteratively(model, data, data, io).plan;
  }
  if (spec.shape == PlanShape::Uniform && spec.unit == PlanUnit::KvGroup)
    throw std::invalid_argument("--shape uniform ranks query heads (--unit head): it removes whole groups where "
                                "their summed importance says so; leave --unit at head");
  ScorePlanOptions po;
  po.target = *spec.target;
  po.per_layer = spec.per_layer;
  po.min_per_layer = spec.min_per_layer;
  po.exclude = masked;
  const ScoreUnit unit = spec.unit == PlanUnit::KvGroup ? ScoreUnit::KvGroup : ScoreUnit::Head;
  auto scores = [&] { return plan_scores(spec, model, data, score, unit); };
  if (spec.shape == PlanShape::Uniform) return plan_uniform_by_score(scores(), cfg, po);
  switch (spec.unit) {
    case PlanUnit::Head: return plan_by_score(scores(), cfg, po);
    case PlanUnit::Balanced: return plan_balanced_by_score(scores(), cfg, po);
    case PlanUnit::KvGroup: return plan_groups_by_score(scores(), cfg, po);
  }
  return {};
}

}  // namespace

bool plan_reads_data(const PlanSpec& spec) {
  switch (spec.strategy) {
    case PlanStrategy::Score:
    case PlanStrategy::Budget: return spec.scores_file.empty();
    case PlanStrategy::Iterative: return true;
    default: return false;
  }
}

PruningPlan make_plan(const PlanSpec& spec, TransformerImpl& model, const EvalSet& data, const ScoreOptions& score,
                      const MetricOptions& measure, Metric metric, const std::function<void(const PrunePoint&)>& on_step) {
  PruningPlan plan = unchecked_plan(spec, model, data, score, measure, metric, on_step);
  validate_plan(plan, model.config());
  return plan;
}

}  // namespace hp
