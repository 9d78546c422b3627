// The importance jobs.
//   run_importance  score every head with one or more methods (score/importance.h) on a checkpoint's
//                   data; OUT/importance.json and OUT/importance.csv; heat maps (or JSON) to print.
//   run_agreement   Spearman and Pearson correlation between the maps of two importance files.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/jobs/job.h"
#include "headprune/score/importance.h"

namespace hp {

struct ImportanceRequest {
  std::string checkpoint;
  std::string out_dir;  // importance.json, importance.csv; "" = print only
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
  std::vector<ScoreMethod> methods = {ScoreMethod::Gradient};
  // Query heads and/or key/value groups (grouped-query attention): every method runs for each unit.
  std::vector<ScoreUnit> units = {ScoreUnit::Head};
  std::optional<Normalization> normalize;  // unset: each method's default
  Granularity granularity = Granularity::Example;
  std::optional<Metric> metric;  // ablation, all_but_one (default: the task's)
  int64_t beam = 1;
  int64_t bootstrap = 1000;
  double alpha = 0.01;
  std::vector<int64_t> special_ids;  // confidence; empty: the tokenizer's eos ([SEP]), or </s> without one
  bool cost = false;  // also time one forward and one forward+backward pass as units of cost
  // Gradient scores one layer's graph at a time (ScoreOptions::layerwise); also chosen by the job when
  // the whole graph would not fit in memory and this does.
  bool layerwise = false;
  // Several processes: each holds a contiguous slice of the layers (ScoreOptions::pipeline).
  bool pipeline = false;
  DataSource data;
};

// ImportanceRequest's options (util/options.h): methods, units, normalization, granularity, the
// ablation metric and its significance test, special ids, cost, layerwise, pipeline. The checkpoint,
// the output and the data are the request's own.
const OptionTable<ImportanceRequest>& importance_request_table();

struct ImportanceResult {
  std::vector<HeadScores> maps;
  nlohmann::json json;  // importance.json: the maps, checkpoint, data, config
  ModelConfig config;
  void print(std::ostream& out) const;  // heat maps (and all_but_one's per-layer summary)
};

ImportanceResult run_importance(const ImportanceRequest& req, const Runtime& rt, const JobEvents& events = {});

// The scoring of run_importance once its model and data are open, for every front end that has them
// (the Python module's in-memory model and token ids too): score_options of the request, the memory
// planned for the most costly of its methods (plan_scoring_memory), the pass cost (req.cost), then one
// map per method and unit in request order (units a method cannot score skipped), gradient's maps of
// several units from one shared pass; each map's info names req.checkpoint, and each says a line.
std::vector<HeadScores> score_importance(LoadedModel& model, const EvalSet& set, const ImportanceRequest& req,
                                         const Runtime& rt, const JobEvents& events = {});

// The scorers' options of a request (score_importance's): special ids default to the tokenizer's eos
// (headprune's own eos without one); no pipeline.
ScoreOptions score_options(const ImportanceRequest& req, const Tokenizer* tokenizer, const Runtime& rt,
                           const JobEvents& events);

struct AgreementRequest {
  std::string a, b;    // importance JSON files
  std::string method;  // compare this method's maps (default: every method both files have)
  bool by_type = false;  // also per attention type
};

// One record per compared pair: {a, b, attn_type, n_heads, spearman, pearson}.
nlohmann::json run_agreement(const AgreementRequest& req, const JobEvents& events = {});

}  // namespace hp
