// Activation importance (Minitron, Muralidharan et al. 2024): calibration data only, no gradients.
// For each channel of o_proj's input (a head's gated context), the mean over an example's valid
// tokens m_bhd; a head's score is the norm of its channels over the batch,
// sqrt(mean_b sum_d m_bhd^2): Minitron's L2 over the batch divided by sqrt(N), so that scores do not
// grow with the number of calibration examples. A key/value group's score is the norm of all its
// query heads' channels, sqrt(mean_b sum_{h in g} sum_d m_bhd^2). Minitron ranks heads within each
// key/value group; `prune --unit balanced` does that with this map.
// It reads o_proj's input only: a head whose o_proj columns are zero but whose values are not is not
// seen as a no-op (its context is not zero).
#include "../scoring_detail.h"

namespace hp::detail {

HeadScores activation_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  const bool groups = opts.unit == ScoreUnit::KvGroup;
  auto layers = attention_layers(model);
  auto keys = layers;  // what the map is keyed by: query heads or key/value heads
  std::vector<torch::Tensor> group_of(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!groups) continue;
    keys[i].heads = layers[i].module->geometry().kv_heads();
    group_of[i] = torch::tensor(layers[i].module->geometry().kv_positions(), torch::kLong).to(device_of(model));
  }
  Accumulator acc(keys, device_of(model));
  auto install = [&](size_t i, torch::Tensor& ctx) {
    layers[i].module->on_context = [&ctx](const torch::Tensor& c) { ctx = c; };
  };
  capture_per_layer(model, data, opts, "activation", layers, install,
                    [&](size_t i, const torch::Tensor& ctx, const Batch& b) {
                      const auto q = query_mask(b, layers[i].type, cfg.arch).to(torch::kDouble);  // [B, T]
                      const auto c = ctx.to(torch::kDouble);                                      // [B, H, T, D]
                      const auto mean = (c * q.view({q.size(0), 1, q.size(1), 1})).sum(2) /
                                        q.sum(1).clamp_min(1.0).view({q.size(0), 1, 1});  // [B, H, D]
                      auto e = mean.pow(2).sum(-1);                                       // [B, H]
                      if (groups)
                        e = torch::zeros({e.size(0), static_cast<int64_t>(keys[i].heads.size())}, e.options())
                                .index_add_(1, group_of[i], e);
                      acc.add_masked(i, e.unsqueeze(-1), torch::ones({e.size(0), 1}, e.options().dtype(torch::kBool)));
                    });
  HeadScores s = acc.mean(keys);
  for (auto& [id, v] : s.scores) v = std::sqrt(v);
  s.unit = opts.unit;
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace hp::detail
