// Ablation scorers (Michel et al. §3.2-3.3): mask heads and re-evaluate the
// task metric on the same examples; each evaluation is one forward pass over the data (plus
// decoding when the metric is BLEU).
#include <stdexcept>

#include "../scoring_detail.h"

namespace hp::detail {
namespace {

MetricOptions metric_options(const ScoreOptions& opts) {
  MetricOptions mo;
  mo.batch_tokens = opts.batch_tokens;
  mo.max_batch = opts.max_batch;
  mo.decode = opts.decode;
  return mo;
}

std::vector<Metric> metrics_with_loss(Metric m) {
  if (m == Metric::Loss) return {Metric::Loss};
  return {Metric::Loss, m};
}


}  // namespace

HeadScores ablation_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  const Metric metric = opts.metric.value_or(default_metric(model.config().arch));
  const auto ms = metrics_with_loss(metric);
  const auto mo = metric_options(opts);
  // What is ablated at a time: one query head, or (unit kv_group) every kept query head of a
  // key/value group, keyed by the group's key/value head id.
  const bool groups = opts.unit == ScoreUnit::KvGroup;
  std::vector<std::pair<HeadId, std::vector<HeadId>>> units;
  for (const auto& a : attention_layers(model)) {
    const auto& g = a.module->geometry();
    if (!groups) {
      for (int64_t h : a.heads) units.push_back({{a.type, a.layer, h}, {{a.type, a.layer, h}}});
      continue;
    }
    for (int64_t kv : g.kv_heads()) {
      std::vector<HeadId> members;
      for (int64_t h : a.heads)
        if (h / g.group_size == kv) members.push_back({a.type, a.layer, h});
      units.push_back({{a.type, a.layer, kv}, members});
    }
  }
  const auto total = static_cast<int64_t>(units.size());
  auto base = measure(model, data, ms, mo);
  const double base_loss = base.at(Metric::Loss).value(), base_metric = base.at(metric).value();
  HeadScores s;
  s.unit = opts.unit;
  int64_t done = 0, n_significant = 0;
  for (const auto& unit : units) {
    const HeadId& id = unit.first;
    const std::vector<HeadId>& members = unit.second;  // a named reference: lambdas below capture it
    std::vector<double> old;
    for (const auto& h : members) {
      const auto& m = model.attention(h.type, h.layer);
      old.push_back(m.head_mask[m.position_of(h.head)].item<double>());
    }
    auto restore = [&] {
      for (size_t k = 0; k < members.size(); ++k) model.set_head_mask(members[k], old[k]);
    };
    for (const auto& h : members) model.set_head_mask(h, 0.0);
    std::map<Metric, MetricSample> ab;
    try {
      ab = measure(model, data, ms, mo);
    } catch (...) {
      restore();
      throw;
    }
    restore();
    const double value = ab.at(metric).value();
    const double p = paired_bootstrap_p(base.at(metric), ab.at(metric), opts.bootstrap_samples, opts.seed);
    const bool significant = p < opts.significance;
    n_significant += significant ? 1 : 0;
    s.scores[id] = higher_is_better(metric) ? base_metric - value : value - base_metric;
    s.columns["metric"][id] = value;
    s.columns["delta_metric"][id] = value - base_metric;
    s.columns["delta_loss"][id] = ab.at(Metric::Loss).value() - base_loss;
    s.columns["p_value"][id] = p;
    s.columns["significant"][id] = significant ? 1.0 : 0.0;
    if (opts.progress) opts.progress("ablation", ++done, total);
  }
  s.info["metric"] = to_string(metric);
  s.info["base_metric"] = base_metric;
  s.info["base_loss"] = base_loss;
  s.info["significance_test"] = "paired bootstrap, two-sided";
  s.info["bootstrap_samples"] = opts.bootstrap_samples;
  s.info["significance_level"] = opts.significance;
  s.info["n_significant"] = n_significant;
  s.info[groups ? "n_groups" : "n_heads"] = total;
  s.info["forward_passes"] = 1 + total;
  s.info["backward_passes"] = 0;
  if (metric == Metric::Bleu) s.info["beam_size"] = opts.decode.beam_size;
  return s;
}

HeadScores all_but_one_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  const Metric metric = opts.metric.value_or(default_metric(model.config().arch));
  const auto ms = metrics_with_loss(metric);
  const auto mo = metric_options(opts);
  auto layers = attention_layers(model);
  int64_t total = 0;
  for (const auto& a : layers) total += a.heads.empty() ? 0 : static_cast<int64_t>(a.heads.size()) + 1;
  const double base_metric = measure(model, data, {metric}, mo).at(metric).value();
  HeadScores s;
  s.higher_is_important = higher_is_better(metric);
  nlohmann::json per_layer = nlohmann::json::array();
  int64_t done = 0, passes = 1;
  for (const auto& a : layers) {
    if (a.heads.empty()) continue;
    torch::NoGradGuard no_grad;
    const auto saved = a.module->head_mask.clone();
    auto run_with = [&](int64_t keep) {  // keep: position of the one head left open, or -1
      a.module->head_mask.zero_();
      if (keep >= 0) a.module->head_mask[keep].copy_(saved[keep]);
      std::map<Metric, MetricSample> r;
      try {
        r = measure(model, data, ms, mo);
      } catch (...) {
        a.module->head_mask.copy_(saved);
        throw;
      }
      a.module->head_mask.copy_(saved);
      ++passes;
      if (opts.progress) opts.progress("all_but_one", ++done, total);
      return r;
    };
    const double layer_masked = run_with(-1).at(metric).value();
    HeadId best{};
    double best_value = 0;
    for (size_t k = 0; k < a.heads.size(); ++k) {
      const HeadId id{a.type, a.layer, a.heads[k]};
      auto r = run_with(static_cast<int64_t>(k));
      const double value = r.at(metric).value();
      s.scores[id] = value;
      s.columns["loss"][id] = r.at(Metric::Loss).value();
      s.columns["delta_metric"][id] = value - base_metric;
      const bool better = higher_is_better(metric) ? value > best_value : value < best_value;
      if (k == 0 || better) {
        best = id;
        best_value = value;
      }
    }
    per_layer.push_back({{"attn_type", to_string(a.type)},
                         {"layer", a.layer},
                         {"best_head", best.head},
                         {"best_head_metric", best_value},
                         {"delta_vs_base", best_value - base_metric},
                         {"layer_masked_metric", layer_masked}});
  }
  s.info["metric"] = to_string(metric);
  s.info["base_metric"] = base_metric;
  s.info["per_layer"] = per_layer;
  s.info["forward_passes"] = passes;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace hp::detail
