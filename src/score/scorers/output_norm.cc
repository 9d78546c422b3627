// Output norm: the mean L2 norm of each head's contribution to its block's output.
#include "../scoring_detail.h"

namespace hp::detail {

HeadScores output_norm_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  auto layers = attention_layers(model);
  Accumulator acc(layers, device_of(model));
  auto install = [&](size_t i, torch::Tensor& ctx) {
    layers[i].module->on_context = [&ctx](const torch::Tensor& c) { ctx = c; };
  };
  capture_per_layer(model, data, opts, "output_norm", layers, install,
                    [&](size_t i, const torch::Tensor& ctx, const Batch& b) {
                      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
                      const auto& W = layers[i].module->o_proj->weight;  // [C, H*D]
                      auto w = W.view({W.size(0), H, -1});               // [C, H, D]
                      auto contrib = torch::einsum("bhtd,chd->bhtc", {ctx.to(W.scalar_type()), w});
                      acc.add_masked(i, contrib.norm(2, {-1}), query_mask(b, layers[i].type, cfg.arch));
                    });
  HeadScores s = acc.mean(layers);
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace hp::detail
