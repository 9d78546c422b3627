// What the jobs share (jobs/*.h: one library entry point per job, each taking a request struct and
// returning a result struct; the command line only fills the request and prints the result):
// where the data comes from, recovery fine-tuning, progress reporting, the inputs every job opens
// once (the model, its tokenizer, the run config, the evaluation split), and the stage table that
// shows the metric before, masked, removed and fine-tuned.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/data/model_dir.h"
#include "headprune/eval/task_eval.h"
#include "headprune/score/importance.h"
#include "headprune/io/outputs.h"
#include "headprune/train/run_config.h"
#include "headprune/train/trainer.h"
#include "headprune/util/options.h"
#include "headprune/util/runtime.h"

namespace hp {

// Which data a job evaluates, scores and fine-tunes on.
struct DataSource {
  std::string config;  // run config whose "data" (and "train") sections to use; "" = the built-in synthetic task
  std::string data_root = "../shared/data";  // where relative data paths start
  std::string split = "valid";               // the split evaluated (and scored on, unless score_split)
  std::string score_split;                   // the split head importance is computed on ("" = split)
  int64_t max_examples = 0;                  // only the first N examples of that split (0 = all)
  // Synthetic task: examples of an evaluation split; 0 = not asked for: 500 for a model of the built-in
  // families' own (no tokenizer, not imported from HF), an error naming the flags for a real model,
  // which must be given its data (config, calibration) or this, knowingly.
  int64_t synthetic_examples = 0;
  int64_t synthetic_split() const { return synthetic_examples > 0 ? synthetic_examples : 500; }
  int64_t synthetic_train = 4000;            // synthetic task: training examples (fine-tuning, gates)
  // Calibration text instead of a split (pruning an LLM with a few sequences, as Minitron and
  // LLM-Pruner do): a text file tokenized with the model's tokenizer, cut into calibration_samples
  // blocks of calibration_length tokens (every split reads them); "random" draws uniformly random token
  // ids instead (speed and memory checks of models with random weights only).
  std::string calibration;
  int64_t calibration_length = 128;
  int64_t calibration_samples = 16;
};

// DataSource's options: `--config`, `--split`, `--calibration` ... and Python's data={...}
// (util/options.h). Subcommands take the rows that apply to them (cli/common.h).
const OptionTable<DataSource>& data_source_table();

// Recovery fine-tuning after pruning: the run config's training options with these overrides.
struct FinetuneOptions {
  int64_t steps = 0;         // 0 = none
  double lr = 0;             // 0 = the run config's
  int64_t batch_tokens = 0;  // 0 = the run config's
  // Distillation from the unpruned model (TrainOptions::distill_weight, distill_temperature,
  // distill_hidden_weight): the job that fine-tunes sets the teacher.
  double distill_weight = 0;
  double distill_temperature = 1;
  double distill_hidden_weight = 0;
  bool distills() const { return steps > 0 && (distill_weight > 0 || distill_hidden_weight > 0); }
};
// FinetuneOptions' options: `--finetune-*`/`--distill-*` and Python's finetune={...} (util/options.h).
const OptionTable<FinetuneOptions>& finetune_option_table();

// The rows of every request that evaluates a metric (members `std::optional<Metric> metric` and
// `int64_t beam`): --metric and --beam. A request's table starts from them.
template <class S>
OptionTable<S> metric_option_rows(const std::string& metric_help = "accuracy, bleu, perplexity or loss (default: the task's)",
                                  const std::string& beam_help = "beam size for BLEU") {
  return OptionTable<S>()
      .parsed("metric", "--metric", metric_help, [](S& s, const std::string& v) { s.metric = parse_metric(v); }, "")
      .integer("beam", "--beam", beam_help, &S::beam, ValueRange::at_least(1));
}

// How a running job reports. Both callbacks are optional (unset = silent).
struct JobEvents {
  struct Progress {
    Progress(std::string phase_, int64_t done_, int64_t total_, std::string unit_ = "step", std::string extra_ = "")
        : phase(std::move(phase_)), done(done_), total(total_), unit(std::move(unit_)), extra(std::move(extra_)) {}
    std::string phase;  // e.g. "gradient", "train", "bench"
    int64_t done = 0, total = 0;
    std::string unit;
    std::string extra;  // e.g. "loss 2.31"
  };
  std::function<void(const Progress&)> progress;
  std::function<void(const std::string& tag, const std::string& line)> note;  // "[tag] line" status lines

  void report(const Progress& p) const {
    if (progress) progress(p);
  }
  void say(const std::string& tag, const std::string& line) const {
    if (note) note(tag, line);
  }
  // A (what, done, total) callback for the scorers' and decoders' progress.
  std::function<void(const std::string&, int64_t, int64_t)> phase_callback() const;
};

// How every job that loads a model for computing loads it: in the runtime's dtype (--dtype; unset = as
// stored). fp16 on the CPU then computes in fp32 (model/precision.h).
LoadOptions load_options(const Runtime& rt);
// Jobs whose weights are fp32 by their nature (training keeps fp32 master weights): rt.dtype unset or
// fp32 passes, anything else is std::invalid_argument naming `job`, --dtype and why.
void refuse_dtype(const Runtime& rt, const std::string& job, const std::string& why);

// A checkpoint and its data, opened once per job: the model (on the runtime's device) with its
// tokenizer, and the run config, read once.
class JobInputs {
 public:
  JobInputs(const std::string& checkpoint, const DataSource& data, const Runtime& runtime);

  LoadedModel loaded;
  Transformer& model() { return loaded.model; }
  // The loaded model's config (kept here: a job may drop the model itself, e.g. prune once the pruned
  // model holds what it needs of it).
  const ModelConfig& config() const { return config_; }
  const DataSource& data() const { return data_; }
  const Runtime& runtime() const { return runtime_; }
  const RunConfig& run_config() const { return run_; }  // the synthetic task's when no config was given

  const EvalSet& eval();          // the split of `data.split` (loaded on first use)
  const EvalSet& score_set();     // the split of `data.score_split`, or eval() when that is "" or the same
  EvalSet load_split(const std::string& split, int64_t max_examples) const;
  const TrainData& train_data();  // the train split and the valid split (loaded on first use)
  // The run config's training options with the runtime's seed.
  TrainOptions train_options() const;
  // For fine-tuning: train_options() with the overrides, warm-up capped at a tenth of the steps,
  // a log line every fifth of them, and evaluation and saving at the end only.
  TrainOptions finetune_options(const FinetuneOptions& f) const;

 private:
  DataSource data_;
  ModelConfig config_;
  Runtime runtime_;
  RunConfig run_;
  nlohmann::json spec_;  // the data section
  std::string spec_source_;
  // What makes the model a real one, text being what it models ("a model imported from HF", "a model
  // with a tokenizer"); "" for the built-in families' own models, whose default data is the synthetic task.
  std::string real_model_;
  mutable bool synthetic_warned_ = false;
  // The synthetic task for a real model: only when asked for (said once, as a warning), else an error
  // naming --calibration, --config and --synthetic.
  void check_synthetic_allowed() const;
  std::optional<EvalSet> eval_, score_;
  std::optional<TrainData> train_;
};

// What a job reads, for the output policy (io/outputs.h: an output equal to, inside or holding one of
// them is refused before any work): the checkpoint, the run config and the files its data section
// names (relative to data_root, or absolute), and any `extra` paths.
std::vector<NamedPath> job_inputs(const std::string& checkpoint, const DataSource& data,
                                  const std::vector<NamedPath>& extra = {});

// Before scoring `set` with scorers of `cost` (score/scorers.def's column; scoring_cost of several):
// the memory they need at its largest batch, checked against what the device has (refused with the
// numbers and a way out); scoring with a backward pass is switched to layer by layer (so.layerwise)
// when the whole graph would not fit or would add more than a fifth to a large model's weights, and
// says so. BackwardWeightSums: the gradient sums (the attention projections' size) count too.
void plan_scoring_memory(TransformerImpl& model, const EvalSet& set, ScoreOptions& so, ScorerCost cost,
                         const JobEvents& events);

// The metric (and loss) of a model at successive stages (before, masked, removed, fine-tuned).
struct StageTable {
  Metric metric = Metric::Loss;
  struct Row {
    std::string stage;
    int64_t heads = 0, params = 0;
    double metric = 0, loss = 0;
  };
  std::vector<Row> rows;
  void record(const std::string& stage, TransformerImpl& model, const EvalSet& set, const MetricOptions& options);
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

// The metric a request names, or the task's default (accuracy, perplexity or BLEU).
Metric metric_or_default(const std::optional<Metric>& m, const ModelConfig& cfg);
std::string fmt(double v, int precision = 4);  // fixed-point
uint64_t dir_bytes(const std::string& dir);     // sum of the regular files' sizes

}  // namespace hp
