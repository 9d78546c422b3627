// Head importance: the dispatch through the scorer table (score/scorers.h), the gradient maps of
// several units from one pass, and the reference pass costs. Each scorer: src/score/scorers/.
#include "headprune/score/importance.h"

#include <chrono>
#include <stdexcept>

#include "headprune/data/dataset.h"
#include "headprune/eval/evaluate.h"
#include "scoring_detail.h"

namespace hp {

const NameTable<Granularity>& granularity_names() {
  static const NameTable<Granularity> t{"granularity", {{Granularity::Example, {"example"}}, {Granularity::Token, {"token"}}}};
  return t;
}

HeadScores score_heads(TransformerImpl& model, const EvalSet& data, ScoreMethod method, const ScoreOptions& opts) {
  const Scorer& row = scorer(method);
  if (row.needs_data && data.examples.empty())
    throw std::invalid_argument("scoring method " + row.name + " needs data, but the set is empty");
  const auto t0 = std::chrono::steady_clock::now();
  if (opts.unit == ScoreUnit::KvGroup && row.groups != GroupRule::Native) {
    if (row.groups == GroupRule::None) throw std::invalid_argument(row.name + " scores query heads only, not groups");
    // Groups from the query heads' raw scores: summed where scores add up, averaged where they are
    // per-head statistics.
    ScoreOptions per_head = opts;
    per_head.unit = ScoreUnit::Head;
    per_head.normalize = Normalization::None;
    HeadScores s = aggregate_groups(score_heads(model, data, method, per_head), model.config(), row.groups == GroupRule::Mean);
    return detail::finish(std::move(s), model, data, opts, method, t0);
  }
  return detail::finish(row.fn(model, data, opts), model, data, opts, method, t0);
}

PassCost measure_pass_cost(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  PassCost c;
  {
    detail::ScoringGuard state(model);
    torch::NoGradGuard no_grad;
    ScoreOptions o = opts;
    o.progress = nullptr;
    detail::for_each_batch(model, data, o, "", [&](const Batch& b) { model.forward(b); });  // warm-up
    auto t0 = std::chrono::steady_clock::now();
    detail::for_each_batch(model, data, o, "", [&](const Batch& b) { model.forward(b); });
    c.forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  {
    detail::ScoringGuard state(model);
    for (auto& p : model.parameters()) p.set_requires_grad(true);
    auto t0 = std::chrono::steady_clock::now();
    ScoreOptions o = opts;
    o.progress = nullptr;
    detail::for_each_batch(model, data, o, "", [&](const Batch& b) {
      auto loss = per_example_nll(model, model.forward(b), b).first.sum();
      loss.backward();
    });
    c.forward_backward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model.zero_grad();
  }
  return c;
}

std::vector<HeadScores> score_gradient_units(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                             const std::vector<ScoreUnit>& units) {
  if (data.examples.empty()) throw std::invalid_argument("gradient needs data: the evaluation set is empty");
  const auto t0 = std::chrono::steady_clock::now();
  auto maps = detail::gradient_units(model, data, opts, units);
  for (auto& m : maps) {
    ScoreOptions o = opts;
    o.unit = m.unit;
    m = detail::finish(std::move(m), model, data, o, ScoreMethod::Gradient, t0);
  }
  return maps;
}

}  // namespace hp
