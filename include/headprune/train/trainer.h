// Training loop: AdamW, warm-up + decay, gradient clipping, token-count batching by length,
// periodic evaluation, best and last checkpoints, and exact resume.
//
// Output directory:
//   last/     checkpoint + trainer_state.json + optimizer.safetensors (resume point)
//   best/     checkpoint with the best validation metric so far
//   history.json  one record per evaluation (for plots)
// Resuming from last/ restores weights, optimizer moments, the dropout RNG and the position
// in the epoch, so an interrupted run ends exactly where an uninterrupted one would
// (same seed and thread count).
//
// Several processes (util/dist.h): every rank builds the same global batches, takes its slice of
// each (dist::slice), and the gradients are summed across ranks, weighted so that the update is the
// one a single process makes on the whole batch (within float rounding). Rank 0's weights are
// copied to the others at the start; dropout draws from a stream per rank and step; evaluation is
// split by batches; only rank 0 writes. A run resumes with the number of processes it started with.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/data/dataset.h"
#include "headprune/eval/evaluate.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/model/transformer.h"
#include "headprune/train/optimizer.h"
#include "headprune/util/options.h"

namespace hp {

struct TrainOptions {
  int64_t max_steps = 1000;
  int64_t batch_tokens = 4096;  // padded tokens per batch
  int64_t max_batch = 256;      // rows per batch
  double lr = 5e-4;
  int64_t warmup_steps = 100;
  LrSchedule schedule = LrSchedule::Linear;
  AdamWOptions adam;
  double clip_norm = 1.0;        // 0 = no clipping
  double label_smoothing = 0.0;  // translation usually 0.1
  int64_t eval_every = 200;
  int64_t log_every = 50;
  int64_t save_every = 0;        // resume checkpoints between evaluations (0 = at evaluations only)
  int64_t keep_every = 0;        // also keep OUT/step-NNNNNN (model only) every N steps, e.g. for
                                 // importance over training (0 = none)
  std::string best_metric = "auto";  // auto (accuracy for classification, else loss) | loss | accuracy
  // Distillation as recovery: with distill_weight w > 0 the objective is (1 - w) * task loss +
  // w * distillation_kl (eval/evaluate.h) at distill_temperature from `teacher`'s logits on the same
  // batch, computed on the fly in eval mode without gradients (nothing of the teacher is trained).
  // distill_hidden_weight h > 0 adds h * hidden_state_mse: the mean squared difference between the
  // student's and the teacher's hidden states entering every attention sub-layer (CoFi's layer-wise
  // distillation; depth and width are the same, since heads are removed, not layers).
  double distill_weight = 0.0;
  double distill_temperature = 1.0;
  double distill_hidden_weight = 0.0;
  std::shared_ptr<TransformerImpl> teacher;  // required when a distillation weight is > 0; not part of to_json()
  bool distills() const { return distill_weight > 0 || distill_hidden_weight > 0; }
  bool bf16 = false;  // bf16 autocast for forward/backward matmuls (fp32 master weights); ~4x faster GEMMs on CPUs with bf16 support
  uint64_t seed = 1;
  // The run directory: a new run needs it missing or empty; resume continues out_dir/last (and says
  // why it cannot); overwrite removes an earlier run first. Neither is part of to_json().
  bool resume = false;
  bool overwrite = false;
  int64_t stop_after = -1;       // stop (without saving) after this step, as if killed: for tests

  // The run config's "train" section and trainer_state.json's "options": train_option_table()'s record.
  nlohmann::json to_json() const;
  static TrainOptions from_json(const nlohmann::json& j);  // strict: unknown keys are errors
};

// TrainOptions' fields, one row each (util/options.h): the JSON record's keys, their ranges (checked
// when read and by train_model). None is a flag: the train section of a run config sets them.
const OptionTable<TrainOptions>& train_option_table();

struct TrainData {
  std::vector<Example> train, valid;
};

struct TrainProgress {
  int64_t step, max_steps;
  double loss, lr, tokens_per_s, elapsed_s;
};
using TrainProgressFn = std::function<void(const TrainProgress&)>;

struct TrainResult {
  int64_t steps = 0;
  double last_loss = 0;       // training loss of the final step
  double best_metric = 0;
  nlohmann::json history;     // evaluation records
  bool interrupted = false;   // stopped by stop_after
  double step_seconds = 0;    // time in training steps (forward, backward, exchange, update), not evaluation
  int64_t step_tokens = 0;    // padded tokens of those steps' batches (all processes')
  int64_t steps_timed = 0;    // the steps of this call (fewer than `steps` after a resume)
};

// Extension points for methods that train extra parameters with the model (learned head gates).
// Steps are 1-based update numbers. A run with hooks cannot be resumed.
struct TrainHooks {
  std::function<void(int64_t step)> before_forward;       // e.g. sample gates
  std::function<torch::Tensor(int64_t step)> extra_loss;  // added to the task loss
  std::function<void(int64_t step)> after_backward;       // e.g. update the extra parameters
  std::function<void()> before_eval;                      // e.g. deterministic gates
  std::function<bool(int64_t step)> stop;                 // true: end the run after this step
  // The extra trained parameters: in a run of several processes their gradients are summed across
  // ranks with the model's, before after_backward.
  std::function<std::vector<torch::Tensor>()> extra_parameters;
  bool save_checkpoints = true;                           // best/, last/, step-N/
};

// A run directory (io/outputs.h's policy, marker kind "train"), locked for one writer (a second fails
// at once) and checked against the options: a new run needs it missing or empty; `resume` needs its
// last/ resume point and says why it cannot; `overwrite` removes an earlier training run first, and
// nothing else (a directory without the marker or a resume point is the user's). An output equal to,
// inside or holding one of `inputs` is refused. Anything else is a std::runtime_error naming the
// directory and what to pass, so a finished run (its best/, history.json) is never replaced silently.
class RunDir {
 public:
  RunDir(const std::string& out_dir, const TrainOptions& opts, const std::vector<NamedPath>& inputs = {});
  const std::string& path() const { return path_; }

 private:
  std::optional<PathLock> lock_;
  std::string path_;
};
constexpr const char* kRunKind = "train";  // the marker kind of a training run's directory

// Trains `model` in place (on resume it is replaced by the saved one). `extra_files` (e.g.
// the tokenizer) are written into every checkpoint. The first form opens the RunDir itself.
TrainResult train_model(Transformer& model, const TrainData& data, const TrainOptions& opts, const std::string& out_dir,
                        const std::map<std::string, std::string>& extra_files = {},
                        const TrainProgressFn& progress = nullptr, const TrainHooks* hooks = nullptr);
TrainResult train_model(Transformer& model, const TrainData& data, const TrainOptions& opts, const RunDir& run_dir,
                        const std::map<std::string, std::string>& extra_files = {},
                        const TrainProgressFn& progress = nullptr, const TrainHooks* hooks = nullptr);

}  // namespace hp
