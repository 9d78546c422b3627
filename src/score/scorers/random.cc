// Random scores: seeded uniform values, the control every other scorer is compared with.
#include "../scoring_detail.h"

#include <random>

namespace hp::detail {

HeadScores random_scores(TransformerImpl& model, const EvalSet&, const ScoreOptions& opts) {
  const uint64_t seed = opts.seed;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  HeadScores s;
  for (const auto& a : attention_layers(model))
    for (int64_t h : a.heads) s.scores[{a.type, a.layer, h}] = u(rng);
  s.info["seed"] = seed;
  s.info["forward_passes"] = 0;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace hp::detail
