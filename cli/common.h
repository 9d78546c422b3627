// Options and helpers shared by the subcommands that evaluate a checkpoint on data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "headprune/eval/task_eval.h"
#include "headprune/io/checkpoint.h"
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
