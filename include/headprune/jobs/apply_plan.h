// Applying a pruning plan to a loaded model: the one path every job that prunes and saves takes
// (prune, gates). Mask the plan's heads and record "masked"; unless mask_only, remove them physically
// (sharing the untouched tensors with the loaded model when nothing is fine-tuned), record "removed"
// and compare the logits with the masked model's; fine-tune (recording "fine-tuned", and Budhraja's
// compensation table when asked); save DIR/model and DIR/plan.json; drop the models, read the
// checkpoint back and compare its logits with those of the model saved. Memory holds one model's
// weights at a time: the loaded model is consumed.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "headprune/jobs/job.h"
#include "headprune/prune/plan.h"

namespace hp {

struct PlanApplication {
  bool mask_only = false;       // save the model with the heads masked instead of removed
  FinetuneOptions finetune;     // recovery fine-tuning after removal (steps 0: none)
  bool compensation = false;    // gradient importance of the kept heads before and after fine-tuning
  ScoreOptions score;           // for the compensation table (on the job's score set)
  MetricOptions measure;        // the stages' evaluation
};

// The output checks, on the first evaluation batch (up to 64 examples).
struct PlanChecks {
  std::optional<double> masked_vs_removed;  // max |logit difference|, masked vs removed (absent with mask_only)
  double reloaded = 0;                      // the saved checkpoint reloaded vs the model saved
  nlohmann::json compensation;              // null unless asked for and fine-tuned
  nlohmann::json to_json() const;           // {"masked_vs_removed_max_abs_diff", "reloaded_max_abs_diff"}
  void print(std::ostream& out) const;      // "checks: ..." line
};

// Applies `plan` to in.model() (in eval mode, its "before" stage already recorded by the caller if
// wanted), evaluating every stage on `set`, and writes DIR/model (with the tokenizer files) and
// DIR/plan.json. DIR/finetune holds the fine-tuning run while it lasts.
PlanChecks apply_plan(JobInputs& in, const PruningPlan& plan, const std::string& dir, const EvalSet& set,
                      const PlanApplication& how, StageTable& stages);

}  // namespace hp
