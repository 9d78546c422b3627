// Applying plans, iterative pruning, pruning curves, compensation analysis (see the header).
#include "headprune/prune/pruning.h"

#include "headprune/io/files.h"
#include "headprune/model/geometry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "headprune/model/remove_heads.h"

namespace hp {
namespace {

// Saves every head mask and puts them back on destruction.
class MaskSnapshot {
 public:
  explicit MaskSnapshot(TransformerImpl& model) : model_(model) {
    for (auto& g : model.head_masks()) saved_.push_back(g.mask.detach().clone());
  }
  ~MaskSnapshot() {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& g : model_.head_masks()) g.mask.copy_(saved_[i++]);
  }

 private:
  TransformerImpl& model_;
  std::vector<torch::Tensor> saved_;
};

std::pair<double, double> metric_and_loss(TransformerImpl& model, const EvalSet& set, Metric metric,
                                          const MetricOptions& mo) {
  std::vector<Metric> ms = {metric};
  if (metric != Metric::Loss) ms.push_back(Metric::Loss);
  const auto r = measure(model, set, ms, mo);
  return {r.at(metric).value(), r.at(Metric::Loss).value()};
}

bool meets(Metric metric, double value, double base, std::optional<double> ratio) {
  if (!ratio) return true;
  return higher_is_better(metric) ? value >= *ratio * base : value <= base / *ratio;
}

std::vector<HeadId> union_of(std::vector<HeadId> a, const std::vector<HeadId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

// Iterative pruning through increasing head counts: at each count, re-score the masked model
// (or reuse the first scores) and mask the least important heads still kept.
std::vector<PrunePoint> iterate(TransformerImpl& model, const EvalSet& score_set, const EvalSet& eval_set,
                                const std::vector<int64_t>& counts, ScoreMethod method, const ScoreOptions& so,
                                bool rescore, int64_t min_per_layer, const std::vector<AttnType>& only_types,
                                PlanShape shape, Metric metric, const MetricOptions& mo, int64_t n_total,
                                const std::function<bool(const PrunePoint&)>& keep_going) {
  MaskSnapshot snap(model);
  const ModelConfig cfg = model.config();
  std::vector<HeadId> pruned = model.masked_heads();
  const std::vector<HeadId> masked_at_start = pruned;
  std::optional<HeadScores> scores;
  std::vector<PrunePoint> out;
  for (int64_t k : counts) {
    const int64_t more = k - static_cast<int64_t>(pruned.size() - masked_at_start.size());
    if (more < 0) throw std::invalid_argument("iterative pruning: head counts must not decrease");
    if (more > 0) {
      if (!scores || rescore) scores = score_heads(model, score_set, method, so);
      ScorePlanOptions po;
      po.target.count = more;
      po.min_per_layer = min_per_layer;
      for (AttnType t : only_types) po.only_types.push_back(t);
      po.exclude = pruned;
      // Uniform: each step is a uniform plan of the masked model (a shape removes whole positions of
      // every layer, so a step may remove fewer than asked; the next one asks for the rest too).
      const auto step = shape == PlanShape::Uniform ? plan_uniform_by_score(*scores, cfg, po) : plan_by_score(*scores, cfg, po);
      model.mask_heads(step.heads);
      pruned = union_of(pruned, step.heads);
    }
    PrunePoint p;
    p.strategy = "iterative:" + to_string(method) + (shape == PlanShape::Uniform ? ":uniform" : "");
    p.n_pruned = shape == PlanShape::Uniform ? static_cast<int64_t>(pruned.size() - masked_at_start.size()) : k;
    p.fraction = n_total > 0 ? static_cast<double>(k) / static_cast<double>(n_total) : 0.0;
    std::tie(p.metric, p.loss) = metric_and_loss(model, eval_set, metric, mo);
    for (const auto& h : pruned)
      if (std::find(masked_at_start.begin(), masked_at_start.end(), h) == masked_at_start.end()) p.pruned.push_back(h);
    out.push_back(p);
    if (!keep_going(out.back())) break;
  }
  return out;
}

}  // namespace

void apply_plan_mask(TransformerImpl& model, const PruningPlan& plan) {
  validate_plan(plan, model.config());
  model.mask_heads(plan.heads);
}

Transformer apply_plan_remove(TransformerImpl& model, const PruningPlan& plan) {
  validate_plan(plan, model.config());
  return remove_heads(model, plan.heads);
}

IterativeResult prune_iteratively(TransformerImpl& model, const EvalSet& score_set, const EvalSet& eval_set,
                                  const IterativeOptions& opts) {
  if (!(opts.step > 0 && opts.step <= 1)) throw std::invalid_argument("iterative pruning: step must be in (0, 1]");
  if (!(opts.target >= 0 && opts.target <= 1)) throw std::invalid_argument("iterative pruning: target must be in [0, 1]");
  const auto masked = model.masked_heads();
  const int64_t n = static_cast<int64_t>(kept_heads(model.config()).size() - masked.size());
  std::vector<int64_t> counts = {0};
  const int64_t per_step = std::max<int64_t>(1, std::llround(opts.step * static_cast<double>(n)));
  const int64_t last = std::llround(opts.target * static_cast<double>(n));
  for (int64_t k = per_step; k < last; k += per_step) counts.push_back(k);
  if (last > 0) counts.push_back(last);
  // The most that min_per_layer allows.
  std::map<std::pair<AttnType, int64_t>, int64_t> per_layer;
  for (const auto& h : kept_heads(model.config())) ++per_layer[{h.type, h.layer}];
  for (const auto& h : masked) --per_layer[{h.type, h.layer}];
  int64_t room = 0;
  for (const auto& [k, v] : per_layer) room += std::max<int64_t>(0, v - opts.min_per_layer);
  while (counts.size() > 1 && counts.back() > room) counts.pop_back();
  if (counts.back() < std::min(last, room)) counts.push_back(std::min(last, room));

  IterativeResult res;
  double base = 0;
  res.steps = iterate(model, score_set, eval_set, counts, opts.method, opts.score, opts.rescore, opts.min_per_layer, {},
                      opts.shape, opts.metric, opts.measure, n, [&](const PrunePoint& p) {
                        if (p.n_pruned == 0) base = p.metric;
                        if (opts.on_step) opts.on_step(p);
                        return meets(opts.metric, p.metric, base, opts.min_metric_ratio);
                      });
  // The largest step that still meets the rule (the last one may have failed it).
  const PrunePoint* best = &res.steps.front();
  for (const auto& p : res.steps)
    if (meets(opts.metric, p.metric, base, opts.min_metric_ratio)) best = &p;
  res.plan.strategy = "iterative:" + to_string(opts.method) + (opts.shape == PlanShape::Uniform ? ":uniform" : "");
  res.plan.heads = best->pruned;
  std::sort(res.plan.heads.begin(), res.plan.heads.end());
  res.plan.info = {{"method", to_string(opts.method)},
                   {"step", opts.step},
                   {"target", opts.target},
                   {"rescore", opts.rescore},
                   {"min_per_layer", opts.min_per_layer},
                   {"base_metric", base},
                   {"metric", best->metric},
                   {"steps_taken", res.steps.size() - 1},
                   {"shape", to_string(opts.shape)}};
  if (opts.min_metric_ratio) res.plan.info["min_metric_ratio"] = *opts.min_metric_ratio;
  return res;
}

std::string CurveSeries::name() const {
  std::string s;
  switch (kind) {
    case Kind::Score:
      s = to_string(method) + (per_layer ? ":per_layer" : "") + (unit != PlanUnit::Head ? ":" + to_string(unit) : "");
      break;
    case Kind::Iterative: s = "iterative:" + to_string(method); break;
    case Kind::Random: s = "random:" + to_string(layers); break;
  }
  for (size_t i = 0; i < only_types.size(); ++i) s += (i ? "+" : "@") + to_string(only_types[i]);
  return s;
}

CurveSeries parse_curve_series(const std::string& text) {
  CurveSeries c;
  std::string s = text;
  const auto at = s.find('@');
  if (at != std::string::npos) {
    std::string types = s.substr(at + 1);
    s = s.substr(0, at);
    size_t pos = 0;
    while (pos <= types.size()) {
      const auto plus = types.find('+', pos);
      c.only_types.push_back(parse_attn_type(types.substr(pos, plus == std::string::npos ? std::string::npos : plus - pos)));
      if (plus == std::string::npos) break;
      pos = plus + 1;
    }
  }
  const auto colon = s.find(':');
  const std::string head = s.substr(0, colon), rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (head == "random") {
    c.kind = CurveSeries::Kind::Random;
    if (!rest.empty()) c.layers = parse_layer_choice(rest);
  } else if (head == "iterative") {
    c.kind = CurveSeries::Kind::Iterative;
    if (!rest.empty()) c.method = parse_score_method(rest);
  } else {
    c.kind = CurveSeries::Kind::Score;
    c.method = parse_score_method(head);
    size_t pos = 0;
    while (!rest.empty() && pos <= rest.size()) {  // modifiers, e.g. "group:per_layer"
      const auto next = rest.find(':', pos);
      const std::string m = rest.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
      if (m == "per_layer" || m == "per-layer")
        c.per_layer = true;
      else if (m == "group" || m == "balanced")
        c.unit = parse_plan_unit(m);
      else
        throw std::invalid_argument("strategy '" + text + "': expected METHOD[:per_layer][:group|:balanced]");
      if (next == std::string::npos) break;
      pos = next + 1;
    }
  }
  return c;
}

namespace {

// The curve's fractions in increasing order, each once, after checking the options.
std::vector<double> curve_grid(const CurveOptions& opts) {
  if (opts.series.empty()) throw std::invalid_argument("pruning curve: no strategies");
  for (double f : opts.fractions)
    if (!(f >= 0 && f <= 1)) throw std::invalid_argument("pruning curve: fraction " + std::to_string(f) + " outside [0, 1]");
  if (opts.finetune_steps > 0 && !opts.train) throw std::invalid_argument("pruning curve: fine-tuning needs training data");
  std::vector<double> grid = opts.fractions;
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  return grid;
}

// The points of a pruning curve, one strategy after another, each measured with its plan masked on
// the model (and, when asked, fine-tuned with the plan removed).
class CurveBuilder {
 public:
  CurveBuilder(TransformerImpl& model, const EvalSet& score_set, const EvalSet& eval_set, const CurveOptions& opts)
      : model_(model), score_set_(score_set), eval_set_(eval_set), opts_(opts), grid_(curve_grid(opts)),
        cfg_(model.config()), masked_(model.masked_heads()) {}
  void add(const CurveSeries& st);
  std::vector<PrunePoint> take() { return std::move(out_); }

 private:
  PruningPlan score_plan(const CurveSeries& st, const HeadScores& scores, size_t i, int64_t count,
                         int64_t n_groups) const;
  std::optional<PruningPlan> random_plan(const CurveSeries& st, const std::vector<HeadId>& free_heads,
                                         size_t i, int64_t count) const;
  PrunePoint measure(const PruningPlan& plan, int64_t n);
  void finetune(PrunePoint& p);
  void emit(const CurveSeries& st, PrunePoint p);

  TransformerImpl& model_;
  const EvalSet& score_set_;
  const EvalSet& eval_set_;
  const CurveOptions& opts_;
  const std::vector<double> grid_;
  const ModelConfig cfg_;
  const std::vector<HeadId> masked_;  // masked before the curve: never chosen, and removed when fine-tuning
  std::vector<PrunePoint> out_;
};

void CurveBuilder::add(const CurveSeries& st) {
  std::vector<HeadId> free_heads;
  for (const auto& h : kept_heads(cfg_, st.only_types))
    if (std::find(masked_.begin(), masked_.end(), h) == masked_.end()) free_heads.push_back(h);
  const int64_t n = static_cast<int64_t>(free_heads.size());
  std::vector<int64_t> counts;
  for (double f : grid_) counts.push_back(std::llround(f * static_cast<double>(n)));
  if (st.kind == CurveSeries::Kind::Iterative) {
    auto steps = iterate(model_, score_set_, eval_set_, counts, st.method, opts_.score, true, opts_.min_per_layer,
                         st.only_types, PlanShape::PerLayer, opts_.metric, opts_.measure, n,
                         [](const PrunePoint&) { return true; });
    for (auto& p : steps) emit(st, p);
    return;
  }
  std::optional<HeadScores> scores;
  if (st.kind == CurveSeries::Kind::Score) {
    ScoreOptions so = opts_.score;
    if (st.unit == PlanUnit::KvGroup) so.unit = ScoreUnit::KvGroup;
    scores = score_heads(model_, score_set_, st.method, so);
  }
  // Whole groups: the grid's fractions count the free key/value groups.
  int64_t n_groups = 0;
  if (st.unit == PlanUnit::KvGroup) {
    std::set<HeadId> groups;
    for (const auto& h : free_heads) groups.insert({h.type, h.layer, h.head / head_geometry(cfg_, h.type, h.layer).group_size});
    n_groups = static_cast<int64_t>(groups.size());
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    PruningPlan plan;
    if (st.kind == CurveSeries::Kind::Score) {
      plan = score_plan(st, *scores, i, counts[i], n_groups);
    } else if (auto random = random_plan(st, free_heads, i, counts[i])) {
      plan = std::move(*random);
    } else {
      break;
    }
    emit(st, measure(plan, n));
  }
}

PruningPlan CurveBuilder::score_plan(const CurveSeries& st, const HeadScores& scores, size_t i, int64_t count,
                                     int64_t n_groups) const {
  ScorePlanOptions po;
  po.per_layer = st.per_layer;
  if (st.per_layer)
    po.target.fraction = grid_[i];
  else
    po.target.count = count;
  po.min_per_layer = opts_.min_per_layer;
  for (AttnType t : st.only_types) po.only_types.push_back(t);
  po.exclude = masked_;
  if (st.unit == PlanUnit::KvGroup) {
    if (!st.per_layer) po.target.count = std::llround(grid_[i] * static_cast<double>(n_groups));
    return plan_groups_by_score(scores, cfg_, po);
  }
  if (st.unit == PlanUnit::Balanced) return plan_balanced_by_score(scores, cfg_, po);
  return plan_by_score(scores, cfg_, po);
}

// Nothing where the layer strategy cannot reach `count` heads: the rest of the grid is skipped.
std::optional<PruningPlan> CurveBuilder::random_plan(const CurveSeries& st, const std::vector<HeadId>& free_heads,
                                                     size_t i, int64_t count) const {
  int64_t eligible = 0;
  for (const auto& h : free_heads) eligible += layer_eligible(st.layers, h.layer, cfg_.n_layers(h.type)) ? 1 : 0;
  if (count > eligible) {
    if (opts_.on_skip)
      opts_.on_skip(st.name() + " cannot prune " + std::to_string(count) + " heads (fraction " +
                    std::to_string(grid_[i]) + "): its eligible layers hold " + std::to_string(eligible));
    return std::nullopt;
  }
  RandomPlanOptions ro;
  ro.target.count = count;
  ro.layers = st.layers;
  ro.seed = st.seed;
  for (AttnType t : st.only_types) ro.only_types.push_back(t);
  ro.exclude = masked_;
  return plan_random(cfg_, ro);
}

// The metric and loss with the plan masked (the masks are put back afterwards); n: the free heads.
PrunePoint CurveBuilder::measure(const PruningPlan& plan, int64_t n) {
  PrunePoint p;
  p.n_pruned = static_cast<int64_t>(plan.heads.size());
  p.fraction = n > 0 ? static_cast<double>(p.n_pruned) / static_cast<double>(n) : 0.0;
  p.pruned = plan.heads;
  MaskSnapshot snap(model_);
  apply_plan_mask(model_, plan);
  std::tie(p.metric, p.loss) = metric_and_loss(model_, eval_set_, opts_.metric, opts_.measure);
  return p;
}

// Recovery fine-tuning of the point's plan (with the heads masked before the curve) removed.
void CurveBuilder::finetune(PrunePoint& p) {
  if (opts_.finetune_steps <= 0) return;
  MaskSnapshot snap(model_);
  model_.unmask_all();
  for (const auto& h : masked_) model_.set_head_mask(h, 0.0);
  PruningPlan plan;
  plan.heads = union_of(p.pruned, masked_);
  Transformer small = apply_plan_remove(model_, plan);
  TrainOptions to = opts_.finetune;
  // Distillation: the model before the curve (its earlier masks, nothing of the plan) teaches.
  if (to.distills()) to.teacher = std::dynamic_pointer_cast<TransformerImpl>(model_.shared_from_this());
  to.max_steps = opts_.finetune_steps;
  to.eval_every = opts_.finetune_steps;
  to.save_every = opts_.finetune_steps;
  const std::string dir = opts_.work_dir + "/finetune";
  remove_tree_or_throw(dir, "fine-tuning");
  train_model(small, *opts_.train, to, dir);
  small->eval();
  const auto [m, l] = metric_and_loss(*small, eval_set_, opts_.metric, opts_.measure);
  p.metric_finetuned = m;
  p.loss_finetuned = l;
  remove_tree_or_throw(dir, "fine-tuning");
}

void CurveBuilder::emit(const CurveSeries& st, PrunePoint p) {
  p.strategy = st.name();
  finetune(p);
  if (opts_.on_point) opts_.on_point(p);
  out_.push_back(std::move(p));
}

}  // namespace

std::vector<PrunePoint> pruning_curve(TransformerImpl& model, const EvalSet& score_set, const EvalSet& eval_set,
                                      const CurveOptions& opts) {
  CurveBuilder curve(model, score_set, eval_set, opts);
  for (const auto& st : opts.series) curve.add(st);
  return curve.take();
}

nlohmann::json compensation(const HeadScores& before, const HeadScores& after) {
  std::map<std::pair<AttnType, int64_t>, std::vector<std::pair<double, double>>> layers;
  std::vector<double> xb, xa;
  for (const auto& [h, v] : after.scores) {
    if (!before.has(h)) continue;
    layers[{h.type, h.layer}].push_back({before.at(h), v});
    xb.push_back(before.at(h));
    xa.push_back(v);
  }
  nlohmann::json rows = nlohmann::json::array();
  double sum_b = 0, sum_a = 0;
  for (const auto& [key, vals] : layers) {
    double b = 0, a = 0;
    for (const auto& [vb, va] : vals) {
      b += vb;
      a += va;
    }
    sum_b += b;
    sum_a += a;
    const double nb = b / static_cast<double>(vals.size()), na = a / static_cast<double>(vals.size());
    rows.push_back({{"attn_type", to_string(key.first)},
                    {"layer", key.second},
                    {"kept_heads", vals.size()},
                    {"mean_before", nb},
                    {"mean_after", na},
                    {"ratio", nb != 0 ? na / nb : 0.0}});
  }
  return {{"method", after.method},
          {"layers", rows},
          {"heads", xb.size()},
          {"total_ratio", sum_b != 0 ? sum_a / sum_b : 0.0},
          {"spearman", spearman(xb, xa)},
          {"pearson", pearson(xb, xa)}};
}

}  // namespace hp
