// The learned-gates job: train Hard Concrete, PASS or PASSCONC gates (prune/gates.h) jointly with the
// model to a head budget, fix them to 0/1, remove the closed heads physically, optionally fine-tune
// with the gates fixed, and evaluate at every stage. Writes OUT/model, OUT/plan.json, OUT/gates.json
// (result, options, per-period log) and OUT/gates_log.csv (step, head, P(open), log alpha). A run that
// misses its target saves everything and reports reached_target false (the CLI exits non-zero).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "headprune/jobs/apply_plan.h"
#include "headprune/jobs/job.h"
#include "headprune/prune/gates.h"
#include "headprune/prune/plan.h"

namespace hp {

struct GatesRequest {
  std::string checkpoint, out_dir;
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
  GateOptions gate;                   // gate.target_kept is set from `prune` when given
  std::optional<PruneTarget> prune;   // heads to prune: a fraction or a count (required by pass, passconc)
  int64_t steps = 1000;               // training steps with gates (plus up to gate.max_extra_steps)
  double lr = 0;                      // model learning rate; 0 = the run config's
  bool from_scratch = false;          // the checkpoint's architecture, trained with gates from a fresh init
  std::optional<Metric> metric;
  int64_t beam = 1;
  DataSource data;
  FinetuneOptions finetune;           // after the gates are fixed
};

// GatesRequest's own options (util/options.h): the target, training steps and rate, from scratch,
// --metric and --beam. The gates' are gate_option_table() (prune/gates.h).
const OptionTable<GatesRequest>& gates_request_table();

struct GatesResult {
  std::string checkpoint, out_dir, data;
  bool from_scratch = false;
  int64_t train_steps = 0, n_heads = 0;
  GateOptions options;
  GateTrainResult gates;
  PruningPlan plan;
  StageTable stages;
  ModelConfig config;  // the model the gates were trained on
  double wall_s = 0;
  PlanChecks checks;  // apply_plan's output checks: masked vs removed, and the saved checkpoint reloaded
  nlohmann::json to_json() const;  // gates.json
  void print(std::ostream& out) const;
};

GatesResult run_gates(const GatesRequest& req, const Runtime& rt, const JobEvents& events = {});

}  // namespace hp
