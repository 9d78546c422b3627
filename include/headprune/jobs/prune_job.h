// The pruning jobs.
//   run_prune  plan (prune/strategy.h) -> mask -> remove physically (unless mask_only) -> optional
//              recovery fine-tuning with Budhraja's compensation table -> evaluate at every stage ->
//              save OUT/model (with the tokenizer), OUT/plan.json and OUT/summary.json; checks that
//              masked and removed give the same outputs and that the saved model reloads exactly.
//   run_plan   the plan alone: the checkpoint and data opened as run_prune opens them, scored alike.
//   run_curve  the metric against the fraction of heads pruned, for several strategies, optionally
//              with recovery fine-tuning at every point; OUT/curve.json and OUT/curve.csv.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/jobs/apply_plan.h"
#include "headprune/jobs/job.h"
#include "headprune/prune/strategy.h"

namespace hp {

struct PruneRequest {
  std::string checkpoint;
  std::string out_dir;  // model/, plan.json, summary.json (and finetune/ while fine-tuning)
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
  PlanSpec plan;        // plan.seed is taken from the runtime
  bool mask_only = false;  // save the model with the heads masked instead of removed
  std::optional<Metric> metric;  // default: the task's
  int64_t beam = 1;              // beam size when the metric is BLEU
  DataSource data;
  FinetuneOptions finetune;
};

// PruneRequest's own options (util/options.h): --metric, --beam and --mask-only. The plan's are
// plan_option_table() and budget_shape_table() (prune/); the data's and fine-tuning's, jobs/job.h's.
const OptionTable<PruneRequest>& prune_request_table();

struct PruneResult {
  std::string checkpoint, out_dir;
  PruningPlan plan;
  StageTable stages;
  std::string data;        // the evaluation set's name
  std::string score_data;  // the set the plan's importance was computed on (the same as data by default)
  uint64_t bytes_before = 0, bytes_after = 0;
  bool mask_only = false;
  // apply_plan's output checks (masked vs removed, reloaded) and Budhraja's compensation table (null
  // without fine-tuning).
  PlanChecks checks;
  // Strategy budget: the chosen model's cost, predicted and then measured (check_budget); else null.
  nlohmann::json budget;
  nlohmann::json to_json() const;      // summary.json
  void print(std::ostream& out) const;  // the stage table, compensation and sizes
};

PruneResult run_prune(const PruneRequest& req, const Runtime& rt, const JobEvents& events = {});

// How a plan is scored and measured, and the stages after it: the request's metric (default: the
// task's) and beam, the runtime's seed, the job's progress.
struct PlanScoring {
  Metric metric = Metric::Loss;
  ScoreOptions score;
  MetricOptions measure;
};
PlanScoring plan_scoring(const ModelConfig& cfg, const std::optional<Metric>& metric, int64_t beam, const Runtime& rt,
                         const JobEvents& events);

// What the scoring a plan does here costs (score/scorers.def's column): its method's for strategy score
// without a scores file and for iterative, Forward for the rest.
ScorerCost plan_scoring_cost(const PlanSpec& spec);

// The one way a job chooses a plan on an open model: spec with the scoring's seed, the memory planned
// for the scoring it does (plan_scoring_memory, which may switch ps.score to layer by layer), then
// make_plan on `set`; iterative steps are said under `tag`.
PruningPlan plan_heads(TransformerImpl& model, PlanSpec spec, const EvalSet& set, PlanScoring& ps,
                       const JobEvents& events, const std::string& tag);

// The plan run_prune would apply, without applying it (Python's headprune.plan).
struct PlanRequest {
  std::string checkpoint;
  PlanSpec plan;                 // plan.seed is taken from the runtime
  std::optional<Metric> metric;  // default: the task's
  int64_t beam = 1;
  DataSource data;               // read only by a plan that scores or measures (plan_reads_data)
};
// PlanRequest's own options: --metric and --beam (the plan's are plan_option_table()'s).
const OptionTable<PlanRequest>& plan_request_table();
PruningPlan run_plan(const PlanRequest& req, const Runtime& rt, const JobEvents& events = {});

struct CurveRequest {
  std::string checkpoint;
  std::string out_dir;  // curve.json, curve.csv; "" = print only
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
  // Seeds of random strategies are taken from the runtime.
  std::vector<CurveSeries> series = {parse_curve_series("gradient"), parse_curve_series("iterative:gradient"),
                                     parse_curve_series("random:uniform")};
  std::vector<double> fractions = {0, .1, .2, .3, .4, .5, .6, .7, .8, .9};
  int64_t min_per_layer = 0;
  std::optional<Metric> metric;
  int64_t beam = 1;
  DataSource data;
  FinetuneOptions finetune;
};

// CurveRequest's options: the series (--strategy, repeatable), --min-per-layer, --metric, --beam.
const OptionTable<CurveRequest>& curve_request_table();

struct CurveResult {
  std::string checkpoint, data;
  std::string score_data;  // the set importance was computed on (the same as data by default)
  Metric metric = Metric::Loss;
  int64_t finetune_steps = 0, min_per_layer = 0;
  int64_t n_heads = 0;                 // attention heads of the model before pruning
  std::vector<PrunePoint> points;
  nlohmann::json to_json() const;  // curve.json
  std::string to_csv() const;      // curve.csv
  void print(std::ostream& out) const;
};

CurveResult run_curve(const CurveRequest& req, const Runtime& rt, const JobEvents& events = {});

}  // namespace hp
