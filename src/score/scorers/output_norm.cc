// Output norm: each head's contribution to its block's output, measured against the residual stream it
// is added to: the mean over valid query tokens of ||o_h|| / ||x||, o_h the head's context through its
// slice of the output projection and x the attention sub-layer's residual input at that token. The
// residual stream's norm grows with depth in a pre-norm model (and every later norm divides it out), so
// the absolute norm (column `absolute`, the mean of ||o_h||) ranks early layers' heads below every later
// one's whatever they do; the share of the stream a head writes is comparable across layers.
#include "../scoring_detail.h"

namespace hp::detail {

HeadScores output_norm_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  auto layers = attention_layers(model);
  Accumulator relative(layers, device_of(model)), absolute(layers, device_of(model));
  std::vector<torch::Tensor> stream(layers.size());  // per layer: ||x|| per token [B, T] of the last batch
  auto install = [&](size_t i, torch::Tensor& ctx) {
    layers[i].module->on_context = [&ctx](const torch::Tensor& c) { ctx = c; };
    layers[i].module->on_output = [&s = stream[i]](const torch::Tensor& x, const torch::Tensor&) {
      s = x.to(torch::kDouble).norm(2, {-1});
    };
  };
  capture_per_layer(model, data, opts, "output_norm", layers, install,
                    [&](size_t i, const torch::Tensor& ctx, const Batch& b) {
                      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
                      const auto& W = layers[i].module->o_proj->weight;  // [C, H*D]
                      auto w = W.view({W.size(0), H, -1});               // [C, H, D]
                      auto contrib = torch::einsum("bhtd,chd->bhtc", {ctx.to(W.scalar_type()), w});
                      const auto norms = contrib.norm(2, {-1}).to(torch::kDouble);  // [B, H, T]
                      const auto q = query_mask(b, layers[i].type, cfg.arch);
                      absolute.add_masked(i, norms, q);
                      relative.add_masked(i, norms / stream[i].clamp_min(1e-12).unsqueeze(1), q);
                    });
  HeadScores s = relative.mean(layers);
  s.columns["absolute"] = absolute.mean(layers).scores;
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace hp::detail
