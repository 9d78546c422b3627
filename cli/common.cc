// Shared subcommand options (see header).
#include "common.h"

#include <CLI/CLI.hpp>

namespace hp::cli {

void add_data_options(CLI::App* sub, DataArgs& d) {
  sub->add_option("--config,--data", d.config_path,
                  "run config whose data section to use (default: the built-in synthetic task)");
  sub->add_option("--split", d.split, "train, valid or test")
      ->check(CLI::IsMember({"train", "valid", "test"}))
      ->capture_default_str();
  sub->add_option("--data-root", d.data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_option("--max-examples,--max-sentences", d.max_examples, "use only the first N examples (0 = all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--synthetic", d.synthetic_n, "examples of the synthetic task when no --config")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

EvalSet load_data(const DataArgs& d, const LoadedModel& m, uint64_t seed) {
  return load_eval_set(m.model->config(), m.tokenizer, d.config_path, d.split, d.data_root, d.max_examples, seed,
                       d.synthetic_n);
}

void PhaseProgress::operator()(const std::string& what, int64_t done, int64_t total) {
  if (what != what_ || !bar_) {
    bar_ = std::make_unique<ProgressBar>(what, total, "step");
    what_ = what;
  }
  bar_->update(done);
  if (done >= total) {
    bar_->finish();
    bar_.reset();
    what_.clear();
  }
}

std::function<void(const std::string&, int64_t, int64_t)> PhaseProgress::callback() {
  return [this](const std::string& w, int64_t d, int64_t t) { (*this)(w, d, t); };
}

}  // namespace hp::cli
