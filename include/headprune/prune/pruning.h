// Pruning with a model in the loop: applying plans, Michel's iterative pruning, pruning curves
// (metric vs. fraction of heads pruned, several strategies, with and without recovery
// fine-tuning) and Budhraja's compensation analysis.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "headprune/eval/task_eval.h"
#include "headprune/prune/plan.h"
#include "headprune/score/importance.h"
#include "headprune/train/trainer.h"

namespace hp {

// Mask (mask entries to 0; shapes unchanged) or remove physically (a new, smaller model).
void apply_plan_mask(TransformerImpl& model, const PruningPlan& plan);
Transformer apply_plan_remove(TransformerImpl& model, const PruningPlan& plan);

// One evaluation of a (partly) pruned model.
struct PrunePoint {
  std::string strategy;
  double fraction = 0;     // of the heads the model had at the start
  int64_t n_pruned = 0;
  double metric = 0, loss = 0;
  std::optional<double> metric_finetuned, loss_finetuned;  // after recovery fine-tuning
  std::vector<HeadId> pruned;
};

// Michel §4: repeatedly prune `step` (a fraction of the starting heads) of the least important
// heads still kept, re-scoring the masked model before each step (unless rescore is off),
// until `target` is pruned or the metric falls below `min_metric_ratio` of the start (for
// perplexity and loss: rises above start / ratio). Layers keep at least `min_per_layer` heads.
struct IterativeOptions {
  double step = 0.1;
  double target = 1.0;
  std::optional<double> min_metric_ratio;
  bool rescore = true;
  int64_t min_per_layer = 0;
  ScoreMethod method = ScoreMethod::Gradient;
  ScoreOptions score;
  Metric metric = Metric::Loss;
  MetricOptions measure;
  std::function<void(const PrunePoint&)> on_step;  // progress: every evaluated step
  // Uniform: every step a uniform plan (plan_uniform_by_score) of the re-scored, masked model; a step's
  // count is what its shape removed (whole positions of every layer), the rest asked for by the next.
  PlanShape shape = PlanShape::PerLayer;
};
struct IterativeResult {
  PruningPlan plan;                 // the largest pruned set that met the stopping rule
  std::vector<PrunePoint> steps;    // step 0 = nothing pruned
};
// The model's head masks are restored afterwards.
IterativeResult prune_iteratively(TransformerImpl& model, const EvalSet& score_set, const EvalSet& eval_set,
                                  const IterativeOptions& opts);

// One series of a pruning curve: how its plans are chosen (`curve --strategy SPEC`; a score
// method, iterative re-scoring or random with a layer choice) and which attention types it prunes.
struct CurveSeries {
  enum class Kind { Score, Iterative, Random } kind = Kind::Score;
  ScoreMethod method = ScoreMethod::Gradient;  // score and iterative
  bool per_layer = false;                      // score
  PlanUnit unit = PlanUnit::Head;              // score: query heads, key/value groups (fractions of groups), balanced
  LayerChoice layers = LayerChoice::Uniform;   // random
  uint64_t seed = 1;                           // random
  std::vector<AttnType> only_types;            // prune only these attention types (empty = all)
  std::string name() const;                    // e.g. "gradient", "iterative:gradient", "random:top", "+cross"
};
// gradient[:per_layer|:group|:balanced] | iterative[:METHOD] | random[:LAYERS] ...[@TYPE]
CurveSeries parse_curve_series(const std::string& s);

struct CurveOptions {
  std::vector<double> fractions = {0, .1, .2, .3, .4, .5, .6, .7, .8, .9};
  std::vector<CurveSeries> series;
  Metric metric = Metric::Loss;
  MetricOptions measure;
  ScoreOptions score;
  int64_t min_per_layer = 0;
  // Recovery fine-tuning of the physically pruned model at every point (0 = none).
  int64_t finetune_steps = 0;
  TrainOptions finetune;            // max_steps is set from finetune_steps
  const TrainData* train = nullptr;  // required when finetune_steps > 0
  std::string work_dir;              // scratch space for fine-tuning runs
  std::function<void(const PrunePoint&)> on_point;
  std::function<void(const std::string&)> on_skip;  // grid points a strategy cannot reach
};
// Every strategy at every fraction of the heads of its attention types, measured on eval_set;
// scores come from score_set (once per strategy, from the unpruned model; iterative re-scores).
std::vector<PrunePoint> pruning_curve(TransformerImpl& model, const EvalSet& score_set, const EvalSet& eval_set,
                                      const CurveOptions& opts);

// Budhraja et al.: how the importance of the kept heads changes with recovery fine-tuning.
// Per attention layer: kept heads, mean score before and after, their ratio; plus the rank
// correlation of the kept heads' scores. Use unnormalized scores (normalization hides shifts).
nlohmann::json compensation(const HeadScores& before, const HeadScores& after);

}  // namespace hp
