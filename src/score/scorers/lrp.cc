// Layer-wise relevance propagation (Voita et al.): each head's relevance to the top-1 logit of every prediction.
#include "../scoring_detail.h"

#include "headprune/util/dist.h"

namespace hp::detail {

HeadScores lrp_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  state.freeze_parameters();
  const auto& cfg = model.config();
  auto layers = attention_layers(model);
  const auto dopts = torch::TensorOptions().dtype(torch::kDouble).device(device_of(model));
  std::vector<torch::Tensor> sums;
  for (const auto& a : layers) sums.push_back(torch::zeros({static_cast<int64_t>(a.heads.size())}, dopts));
  auto n_predictions = torch::zeros({}, dopts);
  for_each_batch(model, data, opts, "lrp", [&](const Batch& b) {
    std::vector<torch::Tensor> probes;
    std::vector<size_t> which;
    for (size_t i = 0; i < layers.size(); ++i) {
      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
      if (H == 0) continue;
      auto p = torch::ones({b.size(), H, 1, 1}, torch::TensorOptions().dtype(torch::kFloat).device(b.input_ids.device()))
                   .requires_grad_(true);
      layers[i].module->head_probe = p;
      probes.push_back(p);
      which.push_back(i);
    }
    if (probes.empty()) return;
    lrp::Scope scope(opts.lrp);
    auto logits = model.forward(b).logits;
    // Relevance 1 on the top-1 logit of every prediction that counts.
    auto seed = torch::zeros_like(logits).scatter_(-1, logits.argmax(-1, true), 1.0);
    if (cfg.arch != Arch::EncoderClassifier) seed = seed * b.labels.ne(kIgnoreIndex).unsqueeze(-1).to(seed.scalar_type());
    if (cfg.arch == Arch::EncoderClassifier) n_predictions += static_cast<double>(b.size());
    else n_predictions += b.labels.ne(kIgnoreIndex).sum().to(torch::kDouble);
    auto rel = torch::autograd::grad({logits}, probes, {seed}, false, false, true);
    for (size_t k = 0; k < probes.size(); ++k)
      if (rel[k].defined()) sums[which[k]] += rel[k].detach().sum({0, 2, 3}).to(torch::kDouble);
  });
  std::vector<torch::Tensor> all = sums;
  all.push_back(n_predictions);
  dist::all_reduce_sum(all);  // several processes: every rank's batches
  const double predictions = n_predictions.item<double>();
  HeadScores s;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto v = sums[i].to(torch::kCPU).contiguous();
    for (size_t k = 0; k < layers[i].heads.size(); ++k)
      s.scores[{layers[i].type, layers[i].layer, layers[i].heads[k]}] =
          predictions > 0 ? v.data_ptr<double>()[k] / predictions : 0.0;
  }
  s.info["predictions"] = predictions;
  s.info["rule"] = {{"alpha", opts.lrp.alpha}, {"beta", opts.lrp.beta}, {"eps", opts.lrp.eps}};
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 1;
  return s;
}

}  // namespace hp::detail
