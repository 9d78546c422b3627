// Options and helpers shared by the subcommands that evaluate a checkpoint on data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <iosfwd>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/eval/task_eval.h"
#include "headprune/io/checkpoint.h"
#include "headprune/train/trainer.h"
#include "headprune/util/progress.h"

namespace CLI {
class App;
}

namespace hp::cli {

// Which data to evaluate on: a run config's data section (default: the built-in synthetic task).
struct DataArgs {
  std::string config_path;
  std::string split = "valid";
  std::string data_root = "../shared/data";
  int64_t max_examples = 0;
  int64_t synthetic_n = 500;
};
// Adds --config/--data, --split, --data-root, --max-examples and --synthetic.
void add_data_options(CLI::App* sub, DataArgs& d);
EvalSet load_data(const DataArgs& d, const LoadedModel& m, uint64_t seed);

// Recovery fine-tuning after pruning (prune, curve, gates).
struct FinetuneArgs {
  int64_t steps = 0;
  double lr = 0;            // 0 = the run config's
  int64_t batch_tokens = 0;  // 0 = the run config's
  int64_t synthetic_train = 4000;
};
// Adds --finetune-steps, --finetune-lr, --finetune-batch-tokens and --synthetic-train.
void add_finetune_options(CLI::App* sub, FinetuneArgs& f);
// Training data: the run config's train and valid splits, or the synthetic task's.
TrainData finetune_data(const DataArgs& d, const FinetuneArgs& f, const LoadedModel& lm, uint64_t seed);
// The run config's train section (or the synthetic task's), as ordinary training uses it.
TrainOptions run_train_options(const DataArgs& d, const LoadedModel& lm);
// Training options: the run config's train section (or the synthetic task's) with f's overrides,
// warm-up capped at a tenth of f.steps.
TrainOptions finetune_options(const DataArgs& d, const FinetuneArgs& f, const LoadedModel& lm, uint64_t seed);
// Both.
std::pair<TrainData, TrainOptions> finetune_setup(const DataArgs& d, const FinetuneArgs& f, const LoadedModel& lm,
                                                  uint64_t seed);

// The files a checkpoint derived from `checkpoint` carries along: its tokenizer (headprune's
// tokenizer.json or an HF tokenizer's vocab.txt / vocab.json / merges.txt / tokenizer_config.json).
std::map<std::string, std::string> tokenizer_extras(const std::string& checkpoint);

// The metric (and loss) of a model at successive stages (before, masked, removed, fine-tuned).
struct StageTable {
  Metric metric;
  const EvalSet& set;
  MetricOptions options;
  struct Row {
    std::string stage;
    int64_t heads, params;
    double metric, loss;
  };
  std::vector<Row> rows;
  void record(const std::string& stage, TransformerImpl& model);
  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

std::string fmt(double v, int precision = 4);  // fixed-point
uint64_t dir_bytes(const std::string& dir);      // sum of the regular files' sizes

// A progress callback (what, done, total) that draws one bar per phase on stderr.
class PhaseProgress {
 public:
  void operator()(const std::string& what, int64_t done, int64_t total);
  std::function<void(const std::string&, int64_t, int64_t)> callback();

 private:
  std::string what_;
  std::unique_ptr<ProgressBar> bar_;
};

}  // namespace hp::cli
