// The scorer table (score/scorers.def) as rows, and the names read from it.
#include "headprune/score/scorers.h"

#include <algorithm>
#include <stdexcept>

#include "headprune/score/importance.h"

namespace hp {
namespace detail {
// Each row's function, defined in src/score/scorers/.
#define HP_SCORER(id, name, needs_data, normalization, groups, cost, fn, help) \
  HeadScores fn(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts);
#include "headprune/score/scorers.def"
#undef HP_SCORER
}  // namespace detail

const std::vector<Scorer>& scorers() {
  static const std::vector<Scorer> rows = {
#define HP_SCORER(id, name, needs_data, normalization, groups, cost, fn, help)                             \
  {ScoreMethod::id, name, needs_data, Normalization::normalization, GroupRule::groups, ScorerCost::cost, &detail::fn, \
   help},
#include "headprune/score/scorers.def"
#undef HP_SCORER
  };
  return rows;
}

const Scorer& scorer(ScoreMethod m) {
  for (const auto& r : scorers())
    if (r.method == m) return r;
  throw std::logic_error("scorer: a ScoreMethod without a row");
}

const NameTable<ScoreMethod>& score_method_names() {
  static const NameTable<ScoreMethod> t = [] {
    std::vector<std::pair<ScoreMethod, std::vector<std::string>>> rows;
    for (const auto& r : scorers()) rows.push_back({r.method, {r.name}});
    return NameTable<ScoreMethod>("scoring method", rows);
  }();
  return t;
}

std::string to_string(ScoreMethod m) { return scorer(m).name; }
ScoreMethod parse_score_method(const std::string& s) { return score_method_names().parse(s); }
std::vector<ScoreMethod> all_score_methods() { return score_method_names().values(); }

std::vector<ScoreMethod> parse_score_methods(const std::string& s) {
  if (s == "all") return all_score_methods();
  return {parse_score_method(s)};
}

bool uses_data(ScoreMethod m) { return scorer(m).needs_data; }
Normalization default_normalization(ScoreMethod m) { return scorer(m).normalization; }

ScorerCost scoring_cost(const std::vector<ScoreMethod>& methods) {
  ScorerCost c = ScorerCost::Forward;
  for (ScoreMethod m : methods) c = std::max(c, scorer(m).cost);
  return c;
}

std::string score_methods_help() {
  std::string out;
  for (const auto& r : scorers()) out += (out.empty() ? "" : "; ") + r.name + " (" + r.help + ")";
  return out;
}

}  // namespace hp
