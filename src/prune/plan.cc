// Pruning plans and the strategies that build them (see the header).
#include "headprune/prune/plan.h"

#include "headprune/model/geometry.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/util/json_fields.h"

namespace hp {
namespace {

std::vector<HeadId> sorted_unique(std::vector<HeadId> heads, const std::string& what) {
  std::sort(heads.begin(), heads.end());
  for (size_t i = 1; i < heads.size(); ++i)
    if (heads[i] == heads[i - 1]) throw std::invalid_argument(what + ": head " + to_string(heads[i]) + " is listed twice");
  return heads;
}

bool wanted(const std::vector<AttnType>& only, AttnType t) {
  return only.empty() || std::find(only.begin(), only.end(), t) != only.end();
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\n\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n\r") - a + 1);
}

}  // namespace

nlohmann::json PruningPlan::to_json() const {
  nlohmann::json hs = nlohmann::json::array();
  for (const auto& h : heads) hs.push_back(to_string(h));
  return {{"format", kPlanFormat}, {"strategy", strategy}, {"n_heads", heads.size()}, {"heads", hs},
          {"info", info}};
}

PruningPlan PruningPlan::from_json(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) throw std::invalid_argument(what + ": a plan must be a JSON object");
  const JsonFields f(j, what, JsonStyle{"field", "is missing", JsonStyle::Nulls::Invalid, JsonStyle::Error::InvalidArgument});
  if (f.has("format")) {
    // Plans have carried their tag since the first release; one of another kind (an importance map,
    // a summary) or of a newer version is refused by name rather than read for its "heads".
    const auto& tag_json = f.at("format");
    const std::string tag = tag_json.is_string() ? tag_json.get<std::string>() : tag_json.dump();
    if (tag != kPlanFormat)
      f.fail("format", "is '" + tag + "', expected '" + kPlanFormat + "' (a plan.json written by headprune prune or curve)");
  }
  if (!f.has("heads") || !f.at("heads").is_array())
    f.fail("heads", "(an array of \"TYPE:LAYER:HEAD\") is missing");
  PruningPlan p;
  std::vector<HeadId> heads;
  for (size_t i = 0; i < f.at("heads").size(); ++i) {
    const auto& h = f.at("heads")[i];
    const std::string at = "heads[" + std::to_string(i) + "]";
    if (!h.is_string()) f.fail(at + " must be a string \"TYPE:LAYER:HEAD\"");
    try {
      heads.push_back(parse_head_id(h.get<std::string>()));
    } catch (const std::invalid_argument& e) {
      f.fail(at + ": " + e.what());
    }
  }
  p.heads = sorted_unique(heads, what);
  p.strategy = f.opt_str("strategy", p.strategy);
  if (f.has("info")) p.info = f.at("info");
  return p;
}

void save_plan(const std::string& path, const PruningPlan& plan) {
  write_json_file(path, plan.to_json());
}

PruningPlan read_plan(const std::string& path) {
  return PruningPlan::from_json(read_json_file(path), path);
}

void validate_plan(const PruningPlan& plan, const ModelConfig& cfg) {
  try {
    validate_heads(cfg, plan.heads);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("plan" + (plan.strategy.empty() ? "" : " (" + plan.strategy + ")") + ": " + e.what());
  }
}

int64_t PruneTarget::resolve(int64_t available, const std::string& what) const {
  if (fraction.has_value() == count.has_value())
    throw std::invalid_argument(what + ": give exactly one of a fraction or a count of heads");
  if (fraction) {
    if (!(*fraction >= 0.0 && *fraction <= 1.0))
      throw std::invalid_argument(what + ": fraction " + std::to_string(*fraction) + " is outside [0, 1]");
    return std::llround(*fraction * static_cast<double>(available));
  }
  if (*count < 0) throw std::invalid_argument(what + ": count " + std::to_string(*count) + " is negative");
  if (*count > available)
    throw std::invalid_argument(what + ": cannot prune " + std::to_string(*count) + " heads, only " +
                                std::to_string(available) + " can be chosen");
  return *count;
}

PruneTarget parse_target(const std::string& text) {
  const std::string s = trim(text);
  PruneTarget t;
  try {
    size_t used = 0;
    if (!s.empty() && s.back() == '%') {
      t.fraction = std::stod(s.substr(0, s.size() - 1), &used) / 100.0;
      if (used != s.size() - 1) throw std::invalid_argument("trailing characters");
    } else if (s.find_first_of(".eE") != std::string::npos) {
      t.fraction = std::stod(s, &used);
      if (used != s.size()) throw std::invalid_argument("trailing characters");
    } else {
      t.count = std::stoll(s, &used);
      if (used != s.size()) throw std::invalid_argument("trailing characters");
    }
  } catch (const std::exception&) {
    throw std::invalid_argument("target '" + text + "': expected a fraction (0.3 or 30%) or a head count (12)");
  }
  if (t.fraction && !(*t.fraction >= 0.0 && *t.fraction <= 1.0))
    throw std::invalid_argument("target '" + text + "': the fraction must be in [0, 1]");
  if (t.count && *t.count < 0) throw std::invalid_argument("target '" + text + "': the count must be >= 0");
  return t;
}

std::vector<HeadId> kept_heads(const ModelConfig& cfg, const std::vector<AttnType>& only_types) {
  std::vector<HeadId> out;
  for (AttnType t : cfg.attn_types()) {
    if (!wanted(only_types, t)) continue;
    for (int64_t l = 0; l < cfg.n_layers(t); ++l)
      for (int64_t h : cfg.heads(t)[static_cast<size_t>(l)]) out.push_back({t, l, h});
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// The candidates (query heads, or key/value groups of a group map) least important first, ties by
// id (HeadScores::ascending_importance), after checking that each has a finite score: a missing
// score means a map of another model or unit, and a NaN orders arbitrarily, so a plan built on it
// would be noise.
std::vector<HeadId> least_important_first(const HeadScores& scores, const std::vector<HeadId>& candidates,
                                          const std::string& what) {
  const std::string unit = scores.unit == ScoreUnit::KvGroup ? "group " : "head ";
  std::vector<std::string> non_finite;
  for (const auto& h : candidates) {
    if (!scores.has(h))
      throw std::invalid_argument(what + ": the " + scores.method + " map has no score for " + unit + to_string(h) +
                                  " (was it computed on another model, or for the other unit?)");
    if (!std::isfinite(scores.scores.at(h))) non_finite.push_back(to_string(h));
  }
  if (!non_finite.empty())
    throw std::invalid_argument(what + ": the " + scores.method + " scores of " + std::to_string(non_finite.size()) +
                                " " + (scores.unit == ScoreUnit::KvGroup ? "groups" : "heads") +
                                " are NaN or infinite (first: " + non_finite.front() +
                                "); the model or the data give non-finite values, no plan is made from them");
  std::vector<HeadId> order;
  const std::set<HeadId> cand(candidates.begin(), candidates.end());
  for (const auto& h : scores.ascending_importance())
    if (cand.count(h)) order.push_back(h);
  return order;
}

}  // namespace

PruningPlan plan_by_score(const HeadScores& scores, const ModelConfig& cfg, const ScorePlanOptions& opts) {
  const std::set<HeadId> excluded(opts.exclude.begin(), opts.exclude.end());
  std::vector<HeadId> candidates;
  for (const auto& h : kept_heads(cfg, opts.only_types)) {
    if (excluded.count(h)) continue;
    candidates.push_back(h);
  }
  const std::vector<HeadId> order = least_important_first(scores, candidates, "plan by score");

  // Heads each layer keeps now (exclusions, e.g. masked heads, count as gone).
  std::map<std::pair<AttnType, int64_t>, int64_t> left;
  for (const auto& h : kept_heads(cfg))
    if (!excluded.count(h)) ++left[{h.type, h.layer}];

  PruningPlan plan;
  plan.strategy = "score:" + scores.method + (opts.per_layer ? ":per_layer" : ":global");
  std::vector<HeadId> chosen;
  if (opts.per_layer) {
    if (!opts.target.fraction) throw std::invalid_argument("plan by score per layer: the target must be a fraction");
    std::map<std::pair<AttnType, int64_t>, std::vector<HeadId>> by_layer;
    for (const auto& h : order) by_layer[{h.type, h.layer}].push_back(h);
    for (auto& [key, hs] : by_layer) {
      const int64_t k = opts.target.resolve(static_cast<int64_t>(hs.size()), "plan by score per layer");
      const int64_t room = std::max<int64_t>(0, left[key] - opts.min_per_layer);
      for (int64_t i = 0; i < std::min(k, room); ++i) chosen.push_back(hs[static_cast<size_t>(i)]);
    }
  } else {
    const int64_t k = opts.target.resolve(static_cast<int64_t>(order.size()), "plan by score");
    for (const auto& h : order) {
      if (static_cast<int64_t>(chosen.size()) == k) break;
      auto& n = left[{h.type, h.layer}];
      if (n <= opts.min_per_layer) continue;
      --n;
      chosen.push_back(h);
    }
    if (static_cast<int64_t>(chosen.size()) < k)
      throw std::invalid_argument("plan by score: only " + std::to_string(chosen.size()) + " of the " +
                                  std::to_string(k) + " heads asked for can go while keeping " +
                                  std::to_string(opts.min_per_layer) + " per layer");
  }
  plan.heads = sorted_unique(chosen, "plan by score");
  plan.info = {{"method", scores.method},
               {"per_layer", opts.per_layer},
               {"min_per_layer", opts.min_per_layer},
               {"candidates", candidates.size()}};
  return plan;
}

const NameTable<PlanUnit>& plan_unit_names() {
  static const NameTable<PlanUnit> t{"plan unit", {{PlanUnit::Head, {"head"}},
                                                   {PlanUnit::KvGroup, {"group", "kv_group"}},
                                                   {PlanUnit::Balanced, {"balanced"}}}};
  return t;
}
std::string to_string(PlanUnit u) { return plan_unit_names().name(u); }
PlanUnit parse_plan_unit(const std::string& s) { return plan_unit_names().parse(s); }

namespace {

// Kept, not excluded query heads of every key/value group of the eligible layers, by (type, layer, kv id).
std::map<HeadId, std::vector<HeadId>> group_members(const ModelConfig& cfg, const ScorePlanOptions& opts) {
  const std::set<HeadId> excluded(opts.exclude.begin(), opts.exclude.end());
  std::map<HeadId, std::vector<HeadId>> out;
  for (const auto& h : kept_heads(cfg, opts.only_types)) {
    if (excluded.count(h)) continue;
    const int64_t R = head_geometry(cfg, h.type, h.layer).group_size;
    out[{h.type, h.layer, h.head / R}].push_back(h);
  }
  return out;
}

// A score oriented so that lower = less important (checked by least_important_first first).
double oriented(const HeadScores& s, const HeadId& h) { return s.higher_is_important ? s.at(h) : -s.at(h); }

}  // namespace

PruningPlan plan_groups_by_score(const HeadScores& groups, const ModelConfig& cfg, const ScorePlanOptions& opts) {
  const std::string what = "plan by group score";
  if (groups.unit != ScoreUnit::KvGroup) throw std::invalid_argument(what + ": needs a key/value group map");
  const auto members = group_members(cfg, opts);
  std::vector<HeadId> candidates;
  for (const auto& m : members) candidates.push_back(m.first);
  const std::vector<HeadId> order = least_important_first(groups, candidates, what);
  std::map<std::pair<AttnType, int64_t>, int64_t> left;
  for (const auto& [g, hs] : members) left[{g.type, g.layer}] += static_cast<int64_t>(hs.size());
  std::vector<HeadId> chosen_groups, heads;
  auto take = [&](const HeadId& g) {
    auto& n = left[{g.type, g.layer}];
    const auto size = static_cast<int64_t>(members.at(g).size());
    if (n - size < opts.min_per_layer) return false;
    n -= size;
    chosen_groups.push_back(g);
    for (const auto& h : members.at(g)) heads.push_back(h);
    return true;
  };
  if (opts.per_layer) {
    if (!opts.target.fraction) throw std::invalid_argument(what + " per layer: the target must be a fraction");
    std::map<std::pair<AttnType, int64_t>, std::vector<HeadId>> by_layer;
    for (const auto& g : order) by_layer[{g.type, g.layer}].push_back(g);
    for (auto& [key, gs] : by_layer) {
      const int64_t k = opts.target.resolve(static_cast<int64_t>(gs.size()), what + " per layer");
      for (int64_t i = 0, taken = 0; i < static_cast<int64_t>(gs.size()) && taken < k; ++i)
        taken += take(gs[static_cast<size_t>(i)]) ? 1 : 0;
    }
  } else {
    const int64_t k = opts.target.resolve(static_cast<int64_t>(order.size()), what);
    for (const auto& g : order) {
      if (static_cast<int64_t>(chosen_groups.size()) == k) break;
      take(g);
    }
    if (static_cast<int64_t>(chosen_groups.size()) < k)
      throw std::invalid_argument(what + ": only " + std::to_string(chosen_groups.size()) + " of the " + std::to_string(k) +
                                  " groups asked for can go while keeping " + std::to_string(opts.min_per_layer) +
                                  " query heads per layer");
  }
  PruningPlan plan;
  plan.strategy = "score:" + groups.method + ":group" + (opts.per_layer ? ":per_layer" : ":global");
  plan.heads = sorted_unique(heads, what);
  nlohmann::json gj = nlohmann::json::array();
  for (const auto& g : chosen_groups) gj.push_back(to_string(g));
  plan.info = {{"method", groups.method}, {"unit", "group"},          {"per_layer", opts.per_layer},
               {"min_per_layer", opts.min_per_layer}, {"groups", gj}, {"candidate_groups", order.size()}};
  return plan;
}

PruningPlan plan_balanced_by_score(const HeadScores& heads, const ModelConfig& cfg, const ScorePlanOptions& opts) {
  const std::string what = "balanced plan by score";
  if (heads.unit != ScoreUnit::Head) throw std::invalid_argument(what + ": needs a query-head map");
  if (opts.per_layer) throw std::invalid_argument(what + ": per-layer targets are not supported (balanced plans are global)");
  const auto members = group_members(cfg, opts);
  // Per layer: each group's heads, least important first; slice s = the s-th head of every group.
  struct Layer {
    std::vector<std::vector<HeadId>> groups;
    size_t next = 0;  // slices taken
    int64_t kept = 0;
  };
  std::map<std::pair<AttnType, int64_t>, Layer> layers;
  std::vector<HeadId> all;
  for (const auto& m : members) all.insert(all.end(), m.second.begin(), m.second.end());
  std::map<HeadId, std::vector<HeadId>> ordered;  // each group's heads, least important first
  for (const auto& h : least_important_first(heads, all, what)) {
    const int64_t R = head_geometry(cfg, h.type, h.layer).group_size;
    ordered[{h.type, h.layer, h.head / R}].push_back(h);
  }
  for (const auto& [g, sorted] : ordered) {
    auto& L = layers[{g.type, g.layer}];
    if (!L.groups.empty() && L.groups.front().size() != sorted.size())
      throw std::invalid_argument(what + ": " + to_string(g.type) + " layer " + std::to_string(g.layer) +
                                  " is unbalanced (its key/value groups keep " + std::to_string(L.groups.front().size()) +
                                  " and " + std::to_string(sorted.size()) + " query heads)");
    L.groups.push_back(sorted);
    L.kept += static_cast<int64_t>(sorted.size());
  }
  int64_t total = 0;
  for (const auto& [k, L] : layers) total += L.kept;
  const int64_t target = opts.target.resolve(total, what);
  std::vector<HeadId> chosen;
  while (true) {
    // The next slice of every layer that can still give one: the least important goes.
    const Layer* best_layer = nullptr;
    std::pair<AttnType, int64_t> best_key{};
    double best = 0;
    for (auto& [key, L] : layers) {
      const auto G = static_cast<int64_t>(L.groups.size());
      if (L.next >= L.groups.front().size()) continue;
      if (static_cast<int64_t>(chosen.size()) + G > target) continue;
      if (L.kept - G < opts.min_per_layer) continue;
      double sum = 0;
      for (const auto& g : L.groups) sum += oriented(heads, g[L.next]);
      if (!best_layer || sum < best) best_layer = &L, best_key = key, best = sum;
    }
    if (!best_layer) break;
    auto& L = layers[best_key];
    for (const auto& g : L.groups) chosen.push_back(g[L.next]);
    L.kept -= static_cast<int64_t>(L.groups.size());
    ++L.next;
  }
  PruningPlan plan;
  plan.strategy = "score:" + heads.method + ":balanced";
  plan.heads = sorted_unique(chosen, what);
  plan.info = {{"method", heads.method}, {"unit", "balanced"}, {"min_per_layer", opts.min_per_layer},
               {"target_heads", target}, {"candidates", total}};
  return plan;
}

const NameTable<PlanShape>& plan_shape_names() {
  static const NameTable<PlanShape> t{"plan shape", {{PlanShape::PerLayer, {"per-layer", "per_layer"}},
                                                     {PlanShape::Uniform, {"uniform"}}}};
  return t;
}
std::string to_string(PlanShape s) { return plan_shape_names().name(s); }
PlanShape parse_plan_shape(const std::string& s) { return plan_shape_names().parse(s); }

namespace {

// One stack's layers for a uniform plan: per layer, its groups' heads, most important first.
struct UniformStack {
  AttnType type;
  std::vector<std::vector<std::vector<HeadId>>> layers;  // [layer][group][head], most important first
  int64_t groups = 0, per_group = 0;                      // as kept now
  // Relative positions (T5): the self-attention layers of a stack read one bias table by head id, so a
  // smaller standard model keeps the same head ids in every layer; they go together, judged by their
  // importance summed over the layers.
  bool same_ids = false;
};

// A uniform model of one head count for every stack: an encoder-decoder (T5's num_heads; headprune's
// config has one n_heads too).
bool one_count_for_all_stacks(const ModelConfig& cfg) { return cfg.arch == Arch::EncoderDecoder; }

// The heads a shape (g groups of r heads kept) removes from one layer, and their summed importance.
std::pair<std::vector<HeadId>, double> uniform_cut(const HeadScores& s, const std::vector<std::vector<HeadId>>& layer,
                                                   int64_t g, int64_t r) {
  std::vector<std::pair<double, size_t>> value;  // a group's kept heads' importance, by group
  double total = 0;
  for (size_t k = 0; k < layer.size(); ++k) {
    double v = 0;
    for (size_t i = 0; i < layer[k].size(); ++i) {
      total += oriented(s, layer[k][i]);
      if (static_cast<int64_t>(i) < r) v += oriented(s, layer[k][i]);
    }
    value.push_back({v, k});
  }
  std::sort(value.begin(), value.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<HeadId> removed;
  double kept = 0;
  for (size_t j = 0; j < value.size(); ++j) {
    const auto& group = layer[value[j].second];
    const bool keep_group = static_cast<int64_t>(j) < g;
    if (keep_group) kept += value[j].first;
    for (size_t i = 0; i < group.size(); ++i)
      if (!keep_group || static_cast<int64_t>(i) >= r) removed.push_back(group[i]);
  }
  return {removed, total - kept};
}

// A shape's cut of every layer of a stack, and its summed importance: each layer its own, or under
// same_ids one cut of the heads' importance summed over the layers, the same ids in every layer.
std::pair<std::vector<HeadId>, double> stack_cut(const HeadScores& s, const UniformStack& st, int64_t g, int64_t r) {
  std::vector<HeadId> removed;
  double importance = 0;
  if (!st.same_ids) {
    for (const auto& layer : st.layers) {
      auto [rm, imp] = uniform_cut(s, layer, g, r);
      removed.insert(removed.end(), rm.begin(), rm.end());
      importance += imp;
    }
    return {removed, importance};
  }
  HeadScores summed;
  summed.method = s.method;
  std::vector<std::vector<HeadId>> layer0;  // layer 0's groups, by summed importance
  for (const auto& group : st.layers.front()) {
    std::vector<HeadId> g0 = group;
    for (const auto& h : g0) {
      double v = 0;
      for (size_t l = 0; l < st.layers.size(); ++l) v += oriented(s, {h.type, static_cast<int64_t>(l), h.head});
      summed.scores[h] = v;
    }
    std::stable_sort(g0.begin(), g0.end(), [&](const HeadId& a, const HeadId& b) { return summed.scores[a] > summed.scores[b]; });
    layer0.push_back(g0);
  }
  auto [rm0, imp] = uniform_cut(summed, layer0, g, r);
  for (size_t l = 0; l < st.layers.size(); ++l)
    for (const auto& h : rm0) removed.push_back({h.type, static_cast<int64_t>(l), h.head});
  return {removed, imp};
}

// One option per stack (a shape, or a kept count): what it keeps per layer and removes in all.
struct StackOption {
  int64_t kept, removed;
};

// The combination (an option index per stack) that removes the most heads within `target`, the lowest
// `cost` among those (the first found on a tie); with `one_count`, only combinations that keep one count
// in every stack. Empty: none fits.
std::vector<size_t> best_combination(const std::vector<std::vector<StackOption>>& options, int64_t target, bool one_count,
                                     const std::function<double(const std::vector<size_t>&)>& cost) {
  std::vector<size_t> pick(options.size(), 0), best;
  int64_t best_removed = -1;
  double best_cost = 0;
  std::function<void(size_t, int64_t)> search = [&](size_t k, int64_t removed) {
    if (removed > target) return;
    if (one_count && k > 1 && options[k - 1][pick[k - 1]].kept != options[0][pick[0]].kept) return;
    if (k == options.size()) {
      const double c = cost(pick);
      if (removed > best_removed || (removed == best_removed && c < best_cost)) best = pick, best_removed = removed, best_cost = c;
      return;
    }
    for (size_t i = 0; i < options[k].size(); ++i) {
      pick[k] = i;
      search(k + 1, removed + options[k][i].removed);
    }
  };
  search(0, 0);
  return best;
}

std::vector<UniformStack> uniform_stacks(const HeadScores& heads, const ModelConfig& cfg, const ScorePlanOptions& opts,
                                         const std::string& what) {
  std::map<AttnType, std::map<int64_t, std::vector<std::vector<HeadId>>>> by_stack;
  const auto members = group_members(cfg, opts);
  for (const auto& [g, hs] : members) {
    std::vector<HeadId> sorted = least_important_first(heads, hs, what);
    std::reverse(sorted.begin(), sorted.end());
    by_stack[g.type][g.layer].push_back(sorted);
  }
  std::vector<UniformStack> out;
  for (auto& [type, layers] : by_stack) {
    UniformStack st{type, {}, 0, 0};
    for (auto& [l, groups] : layers) {
      const auto G = static_cast<int64_t>(groups.size());
      for (const auto& g : groups)
        if (static_cast<int64_t>(g.size()) != static_cast<int64_t>(groups.front().size()) ||
            (!st.layers.empty() && (G != st.groups || static_cast<int64_t>(g.size()) != st.per_group)))
          throw std::invalid_argument(what + ": " + to_string(type) + " layer " + std::to_string(l) +
                                      " is already uneven (its kept heads and groups differ from the other layers'); "
                                      "a uniform plan starts from a uniform model");
      if (st.layers.empty()) st.groups = G, st.per_group = static_cast<int64_t>(groups.front().size());
      st.layers.push_back(groups);
    }
    if (static_cast<int64_t>(st.layers.size()) != cfg.n_layers(type))
      throw std::invalid_argument(what + ": a " + to_string(type) + " layer keeps no head; a uniform plan starts from a uniform model");
    st.same_ids = cfg.positional == Positional::Relative && type != AttnType::Cross;
    for (int64_t l = 1; st.same_ids && l < cfg.n_layers(type); ++l)
      if (cfg.heads(type)[static_cast<size_t>(l)] != cfg.heads(type)[0])
        throw std::invalid_argument(what + ": " + to_string(type) + " layer " + std::to_string(l) + " keeps other head ids "
                                    "than layer 0; with relative positions (one bias table per stack) a uniform plan "
                                    "starts from the same heads in every layer");
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace

PruningPlan plan_uniform_by_score(const HeadScores& heads, const ModelConfig& cfg, const ScorePlanOptions& opts,
                                  const std::map<AttnType, int64_t>* kept_per_layer) {
  const std::string what = "uniform plan by score";
  if (heads.unit != ScoreUnit::Head) throw std::invalid_argument(what + ": needs a query-head map");
  if (opts.per_layer) throw std::invalid_argument(what + ": per-layer targets do not apply (every layer loses the same)");
  const auto stacks = uniform_stacks(heads, cfg, opts, what);
  int64_t total = 0;
  for (const auto& st : stacks) total += static_cast<int64_t>(st.layers.size()) * st.groups * st.per_group;
  const int64_t target = kept_per_layer ? total : opts.target.resolve(total, what);
  // Every stack's shapes (g, r) and what each removes; then the best combination, stack by stack.
  struct Shape { int64_t g, r, removed; double importance; };
  std::vector<std::vector<Shape>> shapes;
  for (const auto& st : stacks) {
    std::vector<Shape> v;
    const auto fixed = kept_per_layer ? kept_per_layer->find(st.type) : std::map<AttnType, int64_t>::const_iterator{};
    if (kept_per_layer && fixed == kept_per_layer->end())
      throw std::invalid_argument(what + ": no kept count given for " + to_string(st.type));
    for (int64_t g = 1; g <= st.groups; ++g)
      for (int64_t r = 1; r <= st.per_group; ++r) {
        if (g * r < opts.min_per_layer || (kept_per_layer && g * r != fixed->second)) continue;
        const double imp = stack_cut(heads, st, g, r).second;
        v.push_back({g, r, static_cast<int64_t>(st.layers.size()) * (st.groups * st.per_group - g * r), imp});
      }
    if (v.empty())
      throw std::invalid_argument(what + ": no shape of " + to_string(st.type) + " keeps " +
                                  (kept_per_layer ? "exactly " + std::to_string(fixed->second)
                                                  : "at least " + std::to_string(opts.min_per_layer)) +
                                  " heads per layer");
    shapes.push_back(std::move(v));
  }
  std::vector<std::vector<StackOption>> options;
  for (const auto& v : shapes) {
    options.emplace_back();
    for (const auto& sh : v) options.back().push_back({sh.g * sh.r, sh.removed});
  }
  const std::vector<size_t> best =
      best_combination(options, target, one_count_for_all_stacks(cfg), [&](const std::vector<size_t>& pick) {
        double imp = 0.0;
        for (size_t k = 0; k < pick.size(); ++k) imp += shapes[k][pick[k]].importance;
        return imp;
      });
  int64_t best_removed = 0;
  for (size_t k = 0; k < best.size(); ++k) best_removed += shapes[k][best[k]].removed;
  std::vector<HeadId> chosen;
  nlohmann::json kept = nlohmann::json::object();
  if (best.empty()) throw std::invalid_argument(what + ": no shape keeps as many heads in every stack (one head count)");
  for (size_t k = 0; k < stacks.size(); ++k) {
    const Shape& sh = shapes[k][best[k]];
    const auto removed = stack_cut(heads, stacks[k], sh.g, sh.r).first;
    chosen.insert(chosen.end(), removed.begin(), removed.end());
    kept[to_string(stacks[k].type)] = {{"key_value_groups", sh.g}, {"query_heads_per_group", sh.r}};
  }
  PruningPlan plan;
  plan.strategy = "score:" + heads.method + ":uniform";
  plan.heads = sorted_unique(chosen, what);
  plan.info = {{"method", heads.method}, {"shape", "uniform"}, {"kept_per_layer", kept},
               {"min_per_layer", opts.min_per_layer}, {"target_heads", kept_per_layer ? best_removed : target},
               {"candidates", total}};
  return plan;
}

std::map<AttnType, int64_t> uniform_kept_per_layer(const ModelConfig& cfg, int64_t target_removed, int64_t min_per_layer) {
  const std::string what = "uniform shape";
  HeadScores none;
  none.method = "none";
  for (const auto& h : kept_heads(cfg, {})) none.scores[h] = 0.0;
  const auto stacks = uniform_stacks(none, cfg, ScorePlanOptions{}, what);
  // Per stack, the distinct kept counts g * r its shapes allow; the most heads removed within the target,
  // then the smallest spread of the kept fractions across stacks.
  std::vector<std::vector<StackOption>> options;
  for (const auto& st : stacks) {
    std::set<int64_t> c;
    for (int64_t g = 1; g <= st.groups; ++g)
      for (int64_t r = 1; r <= st.per_group; ++r)
        if (g * r >= min_per_layer) c.insert(g * r);
    if (c.empty()) throw std::invalid_argument(what + ": no shape of " + to_string(st.type) + " keeps " +
                                               std::to_string(min_per_layer) + " heads per layer");
    options.emplace_back();
    for (int64_t kept : c)
      options.back().push_back({kept, static_cast<int64_t>(st.layers.size()) * (st.groups * st.per_group - kept)});
  }
  const std::vector<size_t> best =
      best_combination(options, target_removed, one_count_for_all_stacks(cfg), [&](const std::vector<size_t>& pick) {
        double lo = 1, hi = 0;
        for (size_t i = 0; i < stacks.size(); ++i) {
          const double f = static_cast<double>(options[i][pick[i]].kept) /
                           static_cast<double>(stacks[i].groups * stacks[i].per_group);
          lo = std::min(lo, f), hi = std::max(hi, f);
        }
        return hi - lo;
      });
  if (best.empty()) throw std::invalid_argument(what + ": no uniform shape removes at most " + std::to_string(target_removed) + " heads");
  std::map<AttnType, int64_t> out;
  for (size_t k = 0; k < stacks.size(); ++k) out[stacks[k].type] = options[k][best[k]].kept;
  return out;
}

int64_t uniform_heads_kept(const ModelConfig& cfg, const std::map<AttnType, int64_t>& kept_per_layer) {
  int64_t n = 0;
  for (const auto& [t, k] : kept_per_layer) n += k * cfg.n_layers(t);
  return n;
}

const NameTable<LayerChoice>& layer_choice_names() {
  static const NameTable<LayerChoice> t{"layer strategy",
                                          {{LayerChoice::Uniform, {"uniform"}},
                                           {LayerChoice::AvoidMiddle, {"avoid_middle"}},
                                           {LayerChoice::AvoidConsecutive, {"avoid_consecutive"}},
                                           {LayerChoice::Top, {"top"}},
                                           {LayerChoice::Bottom, {"bottom"}}}};
  return t;
}
std::string to_string(LayerChoice s) { return layer_choice_names().name(s); }
std::vector<LayerChoice> all_layer_choices() { return layer_choice_names().values(); }
LayerChoice parse_layer_choice(const std::string& s) { return layer_choice_names().parse(s); }

bool layer_eligible(LayerChoice s, int64_t l, int64_t L) {
  switch (s) {
    case LayerChoice::Uniform: return true;
    case LayerChoice::AvoidMiddle: return l < L / 3 || l >= L - L / 3;
    case LayerChoice::AvoidConsecutive: return l % 2 == 0;
    case LayerChoice::Top: return l >= L / 2;
    case LayerChoice::Bottom: return l < (L + 1) / 2;
  }
  return false;
}

namespace {
// A uniform plan on seeded random importances (RandomPlanOptions::shape).
PruningPlan plan_random_uniform(const ModelConfig& cfg, const RandomPlanOptions& opts) {
  if (opts.layers != LayerChoice::Uniform)
    throw std::invalid_argument("random plan: --shape uniform takes heads from every layer alike; the layer strategy " +
                                to_string(opts.layers) + " does not apply");
  const std::set<HeadId> excluded(opts.exclude.begin(), opts.exclude.end());
  HeadScores random;
  random.method = "random";
  std::mt19937_64 rng(opts.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const auto& h : kept_heads(cfg, opts.only_types))
    if (!excluded.count(h)) random.scores[h] = u(rng);
  ScorePlanOptions po;
  po.target = opts.target;
  po.exclude = opts.exclude;
  PruningPlan plan = plan_uniform_by_score(random, cfg, po);
  plan.strategy = "random:shape_uniform";
  plan.info["seed"] = opts.seed;
  plan.info["layer_strategy"] = to_string(opts.layers);
  return plan;
}
}  // namespace

PruningPlan plan_random(const ModelConfig& cfg, const RandomPlanOptions& opts) {
  if (opts.shape == PlanShape::Uniform) return plan_random_uniform(cfg, opts);
  const std::set<HeadId> excluded(opts.exclude.begin(), opts.exclude.end());
  std::vector<HeadId> all = kept_heads(cfg, opts.only_types), pool;
  for (const auto& h : all)
    if (!excluded.count(h) && layer_eligible(opts.layers, h.layer, cfg.n_layers(h.type))) pool.push_back(h);
  // The fraction is of every candidate head (the eligible layers limit where they come from).
  int64_t available = 0;
  for (const auto& h : all) available += excluded.count(h) ? 0 : 1;
  const int64_t k = opts.target.resolve(available, "random plan");
  if (k > static_cast<int64_t>(pool.size()))
    throw std::invalid_argument("random plan (" + to_string(opts.layers) + "): " + std::to_string(k) +
                                " heads asked for, but its eligible layers hold only " + std::to_string(pool.size()));
  std::mt19937_64 rng(opts.seed);
  // Partial Fisher-Yates: the first k of a seeded shuffle.
  for (int64_t i = 0; i < k; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, static_cast<int64_t>(pool.size()) - 1);
    std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(pick(rng))]);
  }
  PruningPlan plan;
  plan.strategy = "random:" + to_string(opts.layers);
  plan.heads = sorted_unique({pool.begin(), pool.begin() + k}, "random plan");
  plan.info = {{"seed", opts.seed}, {"layer_strategy", to_string(opts.layers)}, {"eligible_heads", pool.size()}};
  return plan;
}

PruningPlan plan_layers(const ModelConfig& cfg, const std::vector<std::pair<AttnType, int64_t>>& layers) {
  PruningPlan plan;
  plan.strategy = "layers";
  nlohmann::json names = nlohmann::json::array();
  std::vector<HeadId> heads;
  for (const auto& [t, l] : layers) {
    if (!cfg.has(t)) throw std::invalid_argument("layer plan: the model has no " + to_string(t) + " attention");
    if (l < 0 || l >= cfg.n_layers(t))
      throw std::invalid_argument("layer plan: " + to_string(t) + " layer " + std::to_string(l) + " out of range (0.." +
                                  std::to_string(cfg.n_layers(t) - 1) + ")");
    for (int64_t h : cfg.heads(t)[static_cast<size_t>(l)]) heads.push_back({t, l, h});
    names.push_back(to_string(t) + ":" + std::to_string(l));
  }
  plan.heads = sorted_unique(heads, "layer plan");
  plan.info = {{"layers", names}};
  return plan;
}

PruningPlan plan_manual(const std::string& spec, const ModelConfig& cfg, std::optional<AttnType> hf_type) {
  PruningPlan plan;
  plan.strategy = "manual";
  std::vector<HeadId> heads;
  const std::string s = trim(spec);
  if (!s.empty() && s.front() == '{') {
    // HF's prune_heads form: {layer: [heads]} for one attention type.
    const AttnType t = hf_type.value_or(cfg.attn_types().front());
    nlohmann::json j;
    try {
      j = parse_json(s, "--heads");
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
    for (const auto& [layer, hs] : j.items()) {
      int64_t l = 0;
      try {
        size_t used = 0;
        l = std::stoll(layer, &used);
        if (used != layer.size()) throw std::invalid_argument("");
      } catch (const std::exception&) {
        throw std::invalid_argument("--heads: key '" + layer + "' is not a layer number");
      }
      if (!hs.is_array()) throw std::invalid_argument("--heads: layer " + layer + " must map to an array of head ids");
      for (const auto& h : hs) {
        if (!h.is_number_integer()) throw std::invalid_argument("--heads: layer " + layer + ": head ids must be integers");
        heads.push_back({t, l, h.get<int64_t>()});
      }
    }
  } else {
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) {
      item = trim(item);
      if (!item.empty()) heads.push_back(parse_head_id(item));
    }
  }
  plan.heads = sorted_unique(heads, "--heads");
  validate_plan(plan, cfg);
  return plan;
}

}  // namespace hp
