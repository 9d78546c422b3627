// Confidence and entropy (Voita et al.): statistics of each head's attention pattern, from one forward
// pass that returns the attention probabilities.
#include "../scoring_detail.h"

namespace hp::detail {

namespace {

HeadScores attention_stat_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                 bool confidence) {
  ScoringGuard state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  auto layers = attention_layers(model);
  Accumulator acc(layers, device_of(model)), nats(layers, device_of(model));
  for_each_batch(model, data, opts, confidence ? "confidence" : "entropy", [&](const Batch& b) {
    auto out = model.forward(b, {true});
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& probs = out.attention.at(layers[i].type).at(static_cast<size_t>(layers[i].layer));  // [B,H,T,S]
      if (probs.size(1) == 0) continue;
      const auto p = probs.to(torch::kFloat);
      const auto qmask = query_mask(b, layers[i].type, cfg.arch);
      // A head that contributes nothing (see no_op_heads) scores as least important:
      // confidence 0, normalized entropy 1 (uniform attention).
      const auto no_op = no_op_heads(layers[i]).view({1, -1, 1});
      if (confidence) {
        auto allowed = key_mask(b, layers[i].type, cfg.arch);
        const auto ids = key_ids(b, layers[i].type, cfg.arch);
        for (int64_t sid : opts.special_ids) allowed = allowed & ids.ne(sid);
        auto v = p.masked_fill(allowed.logical_not().unsqueeze(1).unsqueeze(2), 0.0).amax(-1);  // [B,H,T]
        acc.add_masked(i, torch::where(no_op, torch::zeros_like(v), v), qmask);
        continue;
      }
      // Entropy in nats, and divided by its maximum ln(n) for the query's n valid keys, so that
      // layers with different key counts (causal vs. bidirectional) are comparable. Queries
      // with a single key (no choice to make) are left out.
      auto allowed = key_mask(b, layers[i].type, cfg.arch).unsqueeze(1);  // [B,1,S]
      const int64_t T = p.size(2), S = p.size(3);
      if (layers[i].type == AttnType::DecoderSelf)
        allowed = allowed & torch::ones({T, S}, torch::kBool).tril().to(allowed.device()).unsqueeze(0);
      const auto n = allowed.sum(-1).to(torch::kFloat);  // [B,T]
      const auto h = -(p * p.clamp_min(1e-12).log()).sum(-1);  // [B,H,T]
      const auto h_max = n.clamp_min(2).log().unsqueeze(1);
      const auto q = qmask & n.gt(1);
      acc.add_masked(i, torch::where(no_op, torch::ones_like(h), h / h_max), q);
      nats.add_masked(i, torch::where(no_op, h_max.expand_as(h), h), q);
    }
  });
  HeadScores s = acc.mean(layers);
  s.higher_is_important = confidence;
  if (confidence) {
    nlohmann::json ex = nlohmann::json::array();
    for (int64_t id : opts.special_ids) ex.push_back(id);
    s.info["excluded_key_ids"] = ex;
  } else {
    s.columns["entropy_nats"] = nats.mean(layers).scores;
    s.info["score"] = "entropy / ln(valid keys), mean over queries with at least two keys";
  }
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace

HeadScores confidence_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  return attention_stat_scores(model, data, opts, true);
}

HeadScores entropy_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  return attention_stat_scores(model, data, opts, false);
}

}  // namespace hp::detail
