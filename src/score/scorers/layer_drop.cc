// Attention-layer drop (as in "What Matters in Transformers? Not All Attention Is Needed", He et al.
// 2024): a layer whose output barely turns the residual stream matters little. Its score is
// 1 - cos(x, x + Attn(x)) averaged over the valid tokens, x the sub-layer's residual input and
// Attn(x) the attention's output (after its norm for pre-LN layers); every head of the layer gets the
// layer's score, so a score-based plan removes whole layers, least changing first.
#include "../scoring_detail.h"

namespace hp::detail {

HeadScores layer_drop_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  ScoringGuard state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  auto layers = attention_layers(model);
  Accumulator acc(layers, device_of(model));
  // The slot holds 1 - cos per token [B, T] of the last batch.
  auto install = [&](size_t i, torch::Tensor& turn) {
    layers[i].module->on_output = [&turn](const torch::Tensor& x, const torch::Tensor& out) {
      const auto xd = x.to(torch::kDouble);
      turn = 1.0 - torch::cosine_similarity(xd, xd + out.to(torch::kDouble), -1);
    };
  };
  capture_per_layer(model, data, opts, "layer_drop", layers, install,
                    [&](size_t i, const torch::Tensor& t, const Batch& b) {
                      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
                      acc.add_masked(i, t.unsqueeze(1).expand({t.size(0), H, t.size(1)}),
                                     query_mask(b, layers[i].type, cfg.arch));
                    });
  HeadScores s = acc.mean(layers);
  for (const auto& [id, v] : s.scores) s.columns["layer_cosine"][id] = 1.0 - v;
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace hp::detail
