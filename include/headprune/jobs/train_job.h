// The training jobs.
//   run_train  train a model from a run config (model, data and train sections; a subword vocabulary
//              is trained on the data when it needs one), or on the built-in synthetic task of a
//              family; OUT/best, OUT/last, OUT/history.json, OUT/train_config.json; resumable.
//   run_init   a randomly initialized checkpoint of a model config (speed studies need no training).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "headprune/jobs/job.h"

namespace hp {

struct TrainRequest {
  std::string config;  // run config; "" = the built-in synthetic task of `family`
  Arch family = Arch::EncoderClassifier;
  std::string out_dir;
  std::string data_root = "../shared/data";
  bool resume = false;      // continue OUT's run from OUT/last (an error if it has none)
  bool overwrite = false;   // replace an earlier run in OUT (without it, a non-empty OUT is refused)
  int64_t max_steps = 0;    // > 0 overrides the config's
  int64_t eval_every = 0;   // > 0 overrides the config's
  int64_t keep_every = -1;  // >= 0 overrides the config's (OUT/step-NNNNNN snapshots)
};

// TrainRequest's options (util/options.h); the output directory and --overwrite are the request's own.
const OptionTable<TrainRequest>& train_request_table();

struct TrainReport {
  TrainResult result;
  double wall_s = 0;
  std::string out_dir;
  nlohmann::json to_json() const;  // steps, last and best metric, wall time, checkpoint paths, history
};

TrainReport run_train(const TrainRequest& req, const Runtime& rt, const JobEvents& events = {});

struct InitRequest {
  std::string config;  // a model config JSON (a bare model object or a run config's "model")
  std::string out_dir;
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
};
// Writes the checkpoint (the constructors' initialization, seeded by the runtime's seed); returns a
// one-line description.
std::string run_init(const InitRequest& req, const Runtime& rt);

}  // namespace hp
