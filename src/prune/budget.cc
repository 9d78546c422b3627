// Pruning to a budget (see header).
#include "headprune/prune/budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "headprune/eval/benchmark.h"
#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "headprune/util/log.h"

namespace hp {

const NameTable<BudgetKind>& budget_kind_names() {
  static const NameTable<BudgetKind> t{"budget",
                                       {{BudgetKind::Latency, {"latency"}},
                                        {BudgetKind::Memory, {"memory"}},
                                        {BudgetKind::KvCache, {"kv-cache", "kv_cache"}},
                                        {BudgetKind::Params, {"params"}}}};
  return t;
}
std::string to_string(BudgetKind k) { return budget_kind_names().name(k); }

nlohmann::json Budget::to_json() const {
  return {{"kind", to_string(kind)}, {"value", value}, {"relative", relative}, {"text", text}};
}

nlohmann::json BudgetShape::to_json() const {
  return {{"batch", batch}, {"seq_len", seq_len},         {"context", context},
          {"warmup", warmup}, {"reps", reps},           {"min_seconds", min_seconds},
          {"margin", margin}, {"table", budget_table_name(fit_line)}};
}

bool parse_budget_table(const std::string& name) {
  if (name != "linear" && name != "measured")
    throw std::invalid_argument("expected \"linear\" or \"measured\", got \"" + name + "\"");
  return name == "linear";
}

const char* budget_table_name(bool fit_line) { return fit_line ? "linear" : "measured"; }

const OptionTable<BudgetShape>& budget_shape_table() {
  using B = BudgetShape;
  using R = ValueRange;
  static const OptionTable<B> t =
      OptionTable<B>()
          .integer("batch", "--budget-batch", "budget: batch of the latency table and the key/value cache", &B::batch,
                   R::at_least(1))
          .integer("seq_len", "--budget-len", "budget: sequence length the latency is measured at", &B::seq_len,
                   R::at_least(1))
          .integer("context", "--budget-context", "budget: positions the key/value cache holds", &B::context,
                   R::at_least(1))
          .integer("warmup", "--budget-warmup", "budget: untimed repetitions per model before the latency table's",
                   &B::warmup, R::at_least(0))
          .integer("reps", "--budget-reps", "budget: timed repetitions per model in the latency table", &B::reps,
                   R::at_least(1))
          .real("min_seconds", "--budget-min-time",
                "budget, latency: time every model of the table and of the check for at least this many seconds "
                "(more repetitions where needed)",
                &B::min_seconds, R::between(0, kMaxMinSeconds))
          .real("margin", "--budget-margin", "budget, latency: aim this share below the budget (room for timing noise)",
                &B::margin, R::between(0, 0.5))
          .parsed("table", "--budget-table",
                  "budget, latency: plan from each layer type's times on their least-squares line in the heads kept "
                  "(linear, default) or from the times as measured",
                  [](B& b, const std::string& s) { b.fit_line = parse_budget_table(s); }, "linear");
  return t;
}

std::vector<double> fit_kept_line(const std::vector<double>& T) {
  const size_t G = T.empty() ? 0 : T.size() - 1;
  if (G < 3) return T;
  double sc = 0, st = 0, scc = 0, sct = 0;
  for (size_t c = 1; c <= G; ++c) {
    const double x = static_cast<double>(c);
    sc += x, st += T[c], scc += x * x, sct += x * T[c];
  }
  const double n = static_cast<double>(G);
  const double slope = (n * sct - sc * st) / (n * scc - sc * sc), at0 = (st - slope * sc) / n;
  std::vector<double> out(T);
  for (size_t c = 1; c <= G; ++c) out[c] = at0 + slope * static_cast<double>(c);
  return out;
}

namespace {

// The number in front of a suffix; the whole text must be used.
double number_of(const std::string& num, const std::string& text) {
  const auto v = parse_finite_number(num);
  if (!v || !(*v > 0)) throw std::invalid_argument("--budget '" + text + "': '" + num + "' is not a positive number");
  return *v;
}

}  // namespace

Budget parse_budget(const std::string& text) {
  Budget b;
  b.text = text;
  const auto eq = text.find('=');
  if (eq == std::string::npos)
    throw std::invalid_argument("--budget '" + text + "': expected KIND=VALUE, KIND one of latency, memory, kv-cache, params");
  b.kind = budget_kind_names().parse(text.substr(0, eq));
  std::string v = text.substr(eq + 1);
  std::string lower = v;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto ends = [&](const std::string& s) { return lower.size() > s.size() && lower.compare(lower.size() - s.size(), s.size(), s) == 0; };
  auto head = [&](size_t n) { return v.substr(0, v.size() - n); };
  if (ends("x")) {
    b.value = number_of(head(1), text);
  } else if (ends("%")) {
    b.value = number_of(head(1), text) / 100.0;
  } else {
    b.relative = false;
    static const std::vector<std::pair<std::string, double>> bytes = {
        {"gib", 1024.0 * 1024 * 1024}, {"mib", 1024.0 * 1024}, {"kib", 1024.0}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}};
    static const std::vector<std::pair<std::string, double>> counts = {{"b", 1e9}, {"m", 1e6}, {"k", 1e3}};
    bool done = false;
    if (b.kind == BudgetKind::Latency) {
      if (!ends("ms")) throw std::invalid_argument("--budget '" + text + "': a latency is a share (0.7x, 70%) or milliseconds (12ms)");
      b.value = number_of(head(2), text);
      done = true;
    } else if (b.kind == BudgetKind::Params) {
      for (const auto& [s, f] : counts)
        if (!done && ends(s)) b.value = number_of(head(s.size()), text) * f, done = true;
    } else {
      for (const auto& [s, f] : bytes)
        if (!done && ends(s)) b.value = number_of(head(s.size()), text) * f, done = true;
    }
    if (!done) b.value = number_of(v, text);  // a plain count of parameters or bytes
  }
  if (b.relative && b.value > 1)
    throw std::invalid_argument("--budget '" + text + "': a share of the model must be at most 1x (100%)");
  return b;
}

double CostTable::emptied() const {
  std::vector<int64_t> none(layers.size(), 0);
  return predict(none);
}

double CostTable::predict(const std::vector<int64_t>& kept) const {
  if (kept.size() != layers.size()) throw std::invalid_argument("cost table: one kept count per layer is needed");
  double total = full;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& c = layers[i].cost;
    if (kept[i] < 0 || kept[i] >= static_cast<int64_t>(c.size()))
      throw std::invalid_argument("cost table: layer " + std::to_string(layers[i].layer) + " cannot keep " +
                                  std::to_string(kept[i]) + " groups");
    total += c[static_cast<size_t>(kept[i])] - c.back();
  }
  return total;
}

nlohmann::json CostTable::to_json() const {
  nlohmann::json ls = nlohmann::json::array();
  for (const auto& l : layers)
    ls.push_back({{"type", to_string(l.type)}, {"layer", l.layer}, {"groups", l.groups.size()}, {"cost", l.cost}});
  return {{"kind", to_string(kind)}, {"unit", unit}, {"full", full}, {"emptied", emptied()}, {"layers", ls},
          {"measured", measured}};
}

namespace {

// The groups each attention layer keeps now, in model order: (type, layer) -> group ids.
std::vector<LayerCost> layer_groups(TransformerImpl& model) {
  const auto& cfg = model.config();
  std::vector<LayerCost> out;
  for (const auto& g : model.head_masks()) {
    LayerCost l;
    l.type = g.type;
    l.layer = g.layer;
    for (auto kv : head_geometry(cfg, g.type, g.layer).kv_heads()) l.groups.push_back({g.type, g.layer, kv});
    out.push_back(std::move(l));
  }
  return out;
}

// One shape, the budget's repetitions, no GEMM probe.
BenchOptions bench_options(const BudgetShape& shape) {
  BenchOptions bo;
  bo.batch_sizes = {shape.batch};
  bo.seq_lens = {shape.seq_len};
  bo.warmup = shape.warmup;
  bo.reps = shape.reps;
  bo.min_seconds = shape.min_seconds;
  bo.gemm_probe = false;
  return bo;
}

// A handle on a model the caller owns (bench_models takes handles).
Transformer handle(TransformerImpl& m) { return Transformer(std::dynamic_pointer_cast<TransformerImpl>(m.shared_from_this())); }

bool caches(const ModelConfig& cfg, AttnType t) {
  return t == AttnType::Cross || (t == AttnType::DecoderSelf && cfg.arch != Arch::EncoderClassifier);
}

}  // namespace

CostTable counted_costs(TransformerImpl& model, BudgetKind kind, const BudgetShape& shape) {
  if (kind == BudgetKind::Latency) throw std::invalid_argument("counted_costs: latency is measured (latency_costs)");
  if (!model.masked_heads().empty())
    throw std::invalid_argument("budget: the model has masked heads; remove them first (prune without --mask-only)");
  const auto& cfg = model.config();
  CostTable t;
  t.kind = kind;
  t.unit = kind == BudgetKind::Params ? "parameters" : "bytes";
  t.layers = layer_groups(model);
  const auto elem = static_cast<double>(model.parameters().front().element_size());
  bool any_cache = false;
  double fixed = kind == BudgetKind::Params   ? static_cast<double>(model.n_parameters())
                 : kind == BudgetKind::Memory ? static_cast<double>(model.n_parameters()) * elem
                                              : 0.0;
  for (auto& l : t.layers) {
    const auto geo = head_geometry(cfg, l.type, l.layer);
    const double C = static_cast<double>(geo.d_model), D = static_cast<double>(geo.head_dim);
    const double R = static_cast<double>(geo.group_size);
    // A group: R query heads' q rows and o columns, one key/value head's k and v rows, their biases.
    const double params = R * (2 * C * D + (geo.qkv_bias ? D : 0)) + 2 * (C * D + (geo.qkv_bias ? D : 0));
    const bool cached = caches(cfg, l.type);
    any_cache = any_cache || cached;
    const double cache = cached ? 2.0 * static_cast<double>(shape.batch * shape.context) * D * elem : 0.0;
    const double per_group = kind == BudgetKind::Params ? params
                             : kind == BudgetKind::KvCache ? cache
                                                           : params * elem + cache;
    const double n = static_cast<double>(l.groups.size());
    if (kind == BudgetKind::Params || kind == BudgetKind::Memory) fixed -= (kind == BudgetKind::Params ? params : params * elem) * n;
    for (size_t c = 0; c <= l.groups.size(); ++c) l.cost.push_back(per_group * static_cast<double>(c));
  }
  if (kind == BudgetKind::KvCache && !any_cache)
    throw std::invalid_argument("budget: a " + to_string(cfg.arch) + " model keeps no key/value cache (kv-cache budgets are for decoders)");
  double all = fixed;
  for (const auto& l : t.layers) all += l.cost.back();
  t.full = all;
  t.measured = {{"shape", shape.to_json()}, {"element_bytes", elem}};
  return t;
}

CostTable latency_costs(TransformerImpl& model, const BudgetShape& shape,
                        const std::function<void(int64_t, int64_t)>& progress) {
  if (!model.masked_heads().empty())
    throw std::invalid_argument("budget: the model has masked heads; remove them first (prune without --mask-only)");
  const auto& cfg = model.config();
  CostTable t;
  t.kind = BudgetKind::Latency;
  t.unit = "ms";
  t.layers = layer_groups(model);
  // Per attention type: its layers (indices into t.layers) and the one group count they share.
  std::map<AttnType, std::vector<size_t>> of_type;
  for (size_t i = 0; i < t.layers.size(); ++i) of_type[t.layers[i].type].push_back(i);
  std::vector<BenchModel> variants;
  variants.emplace_back("full", handle(model));
  std::vector<std::pair<AttnType, int64_t>> what{{AttnType::EncoderSelf, -1}};  // (type, kept) of each variant
  for (const auto& [type, idx] : of_type) {
    const size_t G = t.layers[idx.front()].groups.size();
    for (auto i : idx)
      if (t.layers[i].groups.size() != G)
        throw std::invalid_argument("budget: the " + to_string(type) + " layers keep different numbers of key/value "
                                    "groups; a latency budget is planned from a model whose layers are alike");
    for (size_t c = 0; c < G; ++c) {  // every layer of the type keeps its first c groups
      std::vector<HeadId> drop;
      for (auto i : idx) {
        const auto geo = head_geometry(cfg, type, t.layers[i].layer);
        for (size_t g = c; g < G; ++g)
          for (auto h : geo.heads)
            if (h / geo.group_size == t.layers[i].groups[g].head) drop.push_back({type, t.layers[i].layer, h});
      }
      variants.emplace_back(to_string(type) + " keeps " + std::to_string(c), remove_heads(model, drop, true));
      what.emplace_back(type, static_cast<int64_t>(c));
    }
  }
  // All variants in one rotation, round by round. (Timing each beside the full model alone, one pair at
  // a time as the check does, took twice as long and predicted the check's shares no better:
  // docs/pruning.md, "Budget planner".)
  const BenchOptions bo = bench_options(shape);
  if (progress) progress(0, 1);
  const auto recs = bench_models(variants, bo);
  if (progress) progress(1, 1);
  // Each variant's time as the full model's median over its median time ratio to the full model in
  // the same round (paired_speedup): a slow drift of the machine during the table cancels out.
  // With shape.fit_line the costs come from the times' line in the kept count (the full model's own
  // time stays t.full: a plan is predicted as the full model less the line's differences).
  t.full = recs.front().median_ms;
  nlohmann::json per_type = nlohmann::json::object(), fitted = nlohmann::json::object();
  for (const auto& [type, idx] : of_type) {
    const size_t G = t.layers[idx.front()].groups.size();
    std::vector<double> T(G + 1, t.full);
    for (size_t v = 1; v < variants.size(); ++v)
      if (what[v].first == type) T[static_cast<size_t>(what[v].second)] = t.full / recs[v].paired_speedup;
    const std::vector<double> F = shape.fit_line ? fit_kept_line(T) : T;
    const double L = static_cast<double>(idx.size());
    for (auto i : idx)
      for (size_t c = 0; c <= G; ++c) t.layers[i].cost.push_back((F[c] - F[0]) / L);
    per_type[to_string(type)] = T;
    fitted[to_string(type)] = F;
  }
  t.measured = {{"model_ms", per_type}, {"shape", shape.to_json()}, {"environment", bench_environment()}};
  if (shape.fit_line) t.measured["model_ms_line"] = fitted;
  return t;
}

nlohmann::json BudgetPlan::to_json(const CostTable& table) const {
  nlohmann::json kept_layers = nlohmann::json::object();
  for (size_t i = 0; i < table.layers.size(); ++i)
    kept_layers[to_string(table.layers[i].type) + ":" + std::to_string(table.layers[i].layer)] = kept[i];
  return {{"kind", to_string(table.kind)}, {"unit", table.unit},        {"limit", limit},
          {"predicted", predicted},        {"full", table.full},        {"emptied", table.emptied()},
          {"importance_kept", importance_kept}, {"importance_total", importance_total},
          {"kept_groups", kept_layers},    {"table", table.to_json()}};
}

namespace {

// The knapsack: per layer the count of its most important groups, the most importance within the limit.
std::vector<int64_t> knapsack_counts(const CostTable& table, const std::vector<std::vector<double>>& value, double limit,
                                     double floor) {
  const size_t L = table.layers.size();
  // Costs above each layer's emptied cost, in bins of the room above the emptied model (rounded up).
  constexpr int64_t kBins = 4000;
  const double room = limit - floor;
  const double bin = room > 0 ? room / static_cast<double>(kBins) : 1.0;
  auto weight = [&](size_t i, size_t c) -> int64_t {
    const double extra = table.layers[i].cost[c] - table.layers[i].cost[0];
    if (extra <= 0) return 0;
    if (room <= 0) return kBins + 1;
    return static_cast<int64_t>(std::ceil(extra / bin - 1e-9));
  };
  const double none = -std::numeric_limits<double>::infinity();
  std::vector<double> best(kBins + 1, none), next;
  best[0] = 0.0;
  std::vector<std::vector<int16_t>> choice(L, std::vector<int16_t>(kBins + 1, -1));
  for (size_t i = 0; i < L; ++i) {
    next.assign(kBins + 1, none);
    for (int64_t w = 0; w <= kBins; ++w) {
      if (best[w] == none) continue;
      for (size_t c = 0; c < value[i].size(); ++c) {
        const int64_t nw = w + weight(i, c);
        if (nw > kBins) continue;
        const double v = best[w] + value[i][c];
        if (v > next[nw]) {
          next[nw] = v;
          choice[i][nw] = static_cast<int16_t>(c);
        }
      }
    }
    best.swap(next);  // choice[i][w]: the count that reached w; its predecessor is w - weight(i, c)
  }
  int64_t at = 0;
  for (int64_t w = 0; w <= kBins; ++w)
    if (best[w] > best[at]) at = w;
  std::vector<int64_t> kept(L, 0);
  for (size_t i = L; i-- > 0;) {
    const int64_t c = choice[i][at];
    kept[i] = c;
    at -= weight(i, static_cast<size_t>(c));
  }
  return kept;
}

// Uniform: every layer of a stack keeps the same number of its groups (the most important in each);
// of the per-stack counts whose predicted cost fits, the one that keeps the most importance. Counts
// start at 1 (a layer without heads is not an ordinary model's).
std::vector<int64_t> uniform_budget_counts(const CostTable& table, const std::vector<std::vector<double>>& value,
                                           double limit) {
  std::map<AttnType, std::vector<size_t>> stacks;
  for (size_t i = 0; i < table.layers.size(); ++i) stacks[table.layers[i].type].push_back(i);
  std::vector<std::vector<size_t>> layers;
  std::vector<int64_t> most;
  for (const auto& [type, idx] : stacks) {
    const size_t G = table.layers[idx.front()].groups.size();
    for (size_t i : idx)
      if (table.layers[i].groups.size() != G)
        throw std::invalid_argument("budget: --shape uniform: " + to_string(type) + " layer " +
                                    std::to_string(table.layers[i].layer) + " keeps another number of key/value groups "
                                    "than the others; a uniform plan starts from a uniform model");
    layers.push_back(idx);
    most.push_back(static_cast<int64_t>(G));
  }
  std::vector<int64_t> pick(layers.size(), 1), kept(table.layers.size(), 0), best;
  double best_value = -std::numeric_limits<double>::infinity(), least = std::numeric_limits<double>::infinity();
  std::function<void(size_t)> search = [&](size_t k) {
    if (k == layers.size()) {
      double v = 0;
      for (size_t st = 0; st < layers.size(); ++st)
        for (size_t i : layers[st]) kept[i] = pick[st], v += value[i][static_cast<size_t>(pick[st])];
      const double cost = table.predict(kept);
      least = std::min(least, cost);
      if (cost <= limit && v > best_value) best_value = v, best = kept;
      return;
    }
    for (pick[k] = 1; pick[k] <= most[k]; ++pick[k]) search(k + 1);
  };
  search(0);
  if (best.empty())
    throw std::invalid_argument("budget: --shape uniform: no uniform model fits " + std::to_string(limit) + " " + table.unit +
                                "; the smallest (one key/value group in every layer) costs " + std::to_string(least) + " " +
                                table.unit);
  return best;
}

}  // namespace

BudgetPlan plan_to_budget(const CostTable& table, const HeadScores& groups, const ModelConfig& cfg, double limit,
                          PlanShape shape) {
  if (groups.unit != ScoreUnit::KvGroup) throw std::invalid_argument("budget: needs a key/value group importance map");
  const double floor = table.emptied();
  if (limit < floor)
    throw std::invalid_argument("budget: " + std::to_string(limit) + " " + table.unit + " is below the least this model "
                                "can cost with every attention layer emptied (" + std::to_string(floor) + " " + table.unit + ")");
  const size_t L = table.layers.size();
  // Each layer's groups, most important first, and the importance kept by its first c.
  std::vector<std::vector<HeadId>> order(L);
  std::vector<std::vector<double>> value(L);
  BudgetPlan out;
  for (size_t i = 0; i < L; ++i) {
    order[i] = table.layers[i].groups;
    auto score = [&](const HeadId& g) { return groups.higher_is_important ? groups.at(g) : -groups.at(g); };
    std::stable_sort(order[i].begin(), order[i].end(), [&](const HeadId& a, const HeadId& b) { return score(a) > score(b); });
    value[i].push_back(0.0);
    for (const auto& g : order[i]) value[i].push_back(value[i].back() + score(g));
    out.importance_total += value[i].back();
  }
  out.kept = shape == PlanShape::Uniform ? uniform_budget_counts(table, value, limit)
                                        : knapsack_counts(table, value, limit, floor);
  out.limit = limit;
  out.predicted = table.predict(out.kept);
  std::set<HeadId> going;
  for (size_t i = 0; i < L; ++i) {
    out.importance_kept += value[i][static_cast<size_t>(out.kept[i])];
    for (size_t g = static_cast<size_t>(out.kept[i]); g < order[i].size(); ++g) going.insert(order[i][g]);
  }
  for (const auto& h : kept_heads(cfg)) {
    const auto geo = head_geometry(cfg, h.type, h.layer);
    if (going.count({h.type, h.layer, h.head / geo.group_size})) out.plan.heads.push_back(h);
  }
  std::sort(out.plan.heads.begin(), out.plan.heads.end());
  out.plan.strategy = "budget:" + to_string(table.kind) + ":" + groups.method;
  out.plan.info = out.to_json(table);
  return out;
}

LatencyPair measure_latency_pair(TransformerImpl& a, TransformerImpl& b, const BudgetShape& shape) {
  std::vector<BenchModel> models;
  models.emplace_back("unpruned", handle(a));
  models.emplace_back("pruned", handle(b));
  const BenchOptions bo = bench_options(shape);
  const auto recs = bench_models(models, bo);
  return {recs[0].median_ms, recs[1].median_ms, 1.0 / recs[1].paired_speedup};
}

nlohmann::json check_budget(TransformerImpl& unpruned, TransformerImpl& pruned, const PruningPlan& plan,
                            const BudgetShape& shape) {
  if (!plan.info.contains("budget") || !plan.info.contains("predicted"))
    throw std::invalid_argument("check_budget: the plan was not made by strategy budget");
  const Budget b = parse_budget(plan.info.at("budget").at("text").get<std::string>());
  const double limit = plan.info.at("limit").get<double>(), predicted = plan.info.at("predicted").get<double>();
  nlohmann::json out = {{"kind", to_string(b.kind)}, {"unit", plan.info.at("unit")}, {"limit", limit}, {"predicted", predicted}};
  double measured = 0;
  bool met = false;
  if (b.kind == BudgetKind::Latency) {
    const LatencyPair m = measure_latency_pair(unpruned, pruned, shape);
    measured = m.b_ms;
    out["measured_unpruned"] = m.a_ms;
    out["predicted_share"] = predicted / plan.info.at("full").get<double>();
    out["measured_share"] = m.share;
    out["share_error"] = out["predicted_share"].get<double>() / m.share - 1.0;
    // The unpruned model's time now over its time in the table: how far the machine's speed moved between
    // the two (the part of `error` the shares, timed in the same rounds, do not see).
    out["drift"] = m.a_ms / plan.info.at("full").get<double>() - 1.0;
    // A share of the model is checked as a share of the unpruned model timed beside it (the machine's
    // speed drifts between the table and this check); milliseconds as milliseconds.
    met = b.relative ? m.share <= b.value : m.b_ms <= b.value;
    out["shape"] = shape.to_json();
    out["environment"] = bench_environment();
  } else {
    measured = counted_costs(pruned, b.kind, shape).full;
    met = measured <= limit * (1 + 1e-12);
  }
  out["measured"] = measured;
  out["error"] = predicted / measured - 1.0;
  out["met"] = met;
  return out;
}

}  // namespace hp
