// Choosing a pruning plan for a model, as one request: the strategy and its settings (what
// `headprune prune --strategy ...` takes), and the one function that turns them into a plan.
//   score      rank by a scoring method (importance.h), globally or per layer, to a target;
//   iterative  Michel's iterative pruning with re-scoring (pruning.h) to a target fraction;
//   random     Budhraja's random pruning with a layer strategy (plan.h), seeded;
//   layers     whole attention layers;
//   manual     a list of heads ("TYPE:LAYER:HEAD,..." or HF's {"layer": [heads]});
//   plan       a plan file written earlier (plan.json);
//   given      the plan in PlanSpec::given (for library callers);
//   budget     the plan that keeps the most importance (a key/value group map of `method`) within a
//              latency, memory, key/value cache or parameter budget (budget.h).
// Heads the model has masked are never chosen again.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headprune/prune/budget.h"
#include "headprune/prune/plan.h"
#include "headprune/prune/pruning.h"
#include "headprune/util/names.h"

namespace hp {

enum class PlanStrategy { Score, Iterative, Random, Layers, Manual, File, Given, Budget };
// score, iterative, random, layers, manual, plan, given, budget
const NameTable<PlanStrategy>& plan_strategy_names();
PlanStrategy parse_plan_strategy(const std::string& s);

struct PlanSpec {
  PlanStrategy strategy = PlanStrategy::Score;
  ScoreMethod method = ScoreMethod::Gradient;  // score, iterative
  std::optional<PruneTarget> target;           // score, iterative (a fraction), random
  bool per_layer = false;                      // score
  PlanUnit unit = PlanUnit::Head;              // score: query heads, whole key/value groups, or balanced
  PlanShape shape = PlanShape::PerLayer;       // score: uniform = the same heads kept in every layer (plan.h)
  int64_t min_per_layer = 0;                   // score, iterative
  LayerChoice layer_strategy = LayerChoice::Uniform;  // random
  uint64_t seed = 1;                           // random
  double step = 0.1;                           // iterative: fraction of the heads per step
  std::optional<double> min_ratio;             // iterative: stop before the metric falls below this share
  std::string heads;                           // manual
  std::optional<AttnType> hf_type;             // manual, HF form: the attention type of its layers
  std::vector<std::pair<AttnType, int64_t>> layers;  // layers
  std::string plan_file;                       // plan
  // score: the map of `method` (and the unit's kind: query heads, or key/value groups for unit group)
  // read from an importance file (`headprune importance --out`) instead of scoring again.
  std::string scores_file;
  PruningPlan given;                           // given
  std::string budget;                          // budget: KIND=VALUE (parse_budget)
  BudgetShape budget_shape;                    // budget: where latency and the key/value cache are measured
};

// PlanSpec's options: `prune --method/--target/--plan/--budget ...` and Python's plan fields
// (util/options.h). The strategy (settle_plan_strategy infers it from what is given), the plan given
// (library and Python callers) and the budget's shape (budget_shape_table) are not rows.
const OptionTable<PlanSpec>& plan_option_table();

// The strategy of a request, for every front end (the CLI's prune, Python's plan and prune): `named`
// when one is named, else the one its inputs imply (a plan file: plan; a budget: budget; a plan given,
// `given`: given; heads: manual), else score. An input of another strategy than the one chosen (a plan
// file and a budget; --strategy random and a plan file) is std::invalid_argument naming both, the same
// message from each front end. Sets spec.strategy.
void settle_plan_strategy(PlanSpec& spec, std::optional<PlanStrategy> named, bool given = false);

// "cross:1,decoder_self:0" -> {(cross, 1), (decoder_self, 0)}; errors name the item.
std::vector<std::pair<AttnType, int64_t>> parse_layer_list(const std::string& s);

// The plan for `model`, validated against it. Score-based strategies score on `data` with `score`;
// iterative pruning measures `metric` on `data` with `measure` and reports each step to on_step.
// A strategy whose settings are missing (no target, no heads, ...) is std::invalid_argument.
PruningPlan make_plan(const PlanSpec& spec, TransformerImpl& model, const EvalSet& data, const ScoreOptions& score,
                      const MetricOptions& measure, Metric metric,
                      const std::function<void(const PrunePoint&)>& on_step = nullptr);
// Whether make_plan reads `data` for this spec: scoring now (score or budget without a scores file) or
// measuring (iterative); plans from a file, a list, whole layers, chance or given scores do not.
bool plan_reads_data(const PlanSpec& spec);

}  // namespace hp
