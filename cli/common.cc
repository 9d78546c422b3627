// Shared subcommand options (see header).
#include "common.h"

#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/io/hf.h"
#include "headprune/train/run_config.h"

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

void add_finetune_options(CLI::App* sub, FinetuneArgs& f) {
  sub->add_option("--finetune-steps", f.steps, "recovery fine-tuning steps after pruning (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--finetune-lr", f.lr, "fine-tuning learning rate (default: the run config's)");
  sub->add_option("--finetune-batch-tokens", f.batch_tokens, "tokens per fine-tuning batch (default: the run config's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--synthetic-train", f.synthetic_train, "training examples of the synthetic task for fine-tuning")
      ->capture_default_str();
}

TrainData finetune_data(const DataArgs& d, const FinetuneArgs& f, const LoadedModel& lm, uint64_t seed) {
  DataArgs train_args = d;
  train_args.split = "train";
  train_args.max_examples = 0;
  train_args.synthetic_n = f.synthetic_train;
  DataArgs valid_args = d;
  valid_args.split = "valid";
  return {load_data(train_args, lm, seed).examples, load_data(valid_args, lm, seed).examples};
}

TrainOptions run_train_options(const DataArgs& d, const LoadedModel& lm) {
  return d.config_path.empty() ? synthetic_run_config(lm.model->config().arch).train
                               : read_run_config(d.config_path, /*require_model=*/false).train;
}

TrainOptions finetune_options(const DataArgs& d, const FinetuneArgs& f, const LoadedModel& lm, uint64_t seed) {
  TrainOptions to = run_train_options(d, lm);
  if (f.lr > 0) to.lr = f.lr;
  if (f.batch_tokens > 0) to.batch_tokens = f.batch_tokens;
  to.warmup_steps = std::min<int64_t>(to.warmup_steps, std::max<int64_t>(1, f.steps / 10));
  to.seed = seed;
  to.log_every = std::max<int64_t>(1, f.steps / 5);
  return to;
}

std::pair<TrainData, TrainOptions> finetune_setup(const DataArgs& d, const FinetuneArgs& f, const LoadedModel& lm,
                                                  uint64_t seed) {
  return {finetune_data(d, f, lm, seed), finetune_options(d, f, lm, seed)};
}

std::map<std::string, std::string> tokenizer_extras(const std::string& checkpoint) {
  std::map<std::string, std::string> extras;
  if (!is_hf_dir(checkpoint))
    if (auto tok = read_checkpoint_file(checkpoint, kTokenizerFile); !tok.empty()) extras[kTokenizerFile] = std::move(tok);
  for (const auto& f : hf_tokenizer_files())
    if (auto bytes = read_checkpoint_file(checkpoint, f); !bytes.empty()) extras[f] = std::move(bytes);
  return extras;
}

std::string fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

void StageTable::record(const std::string& stage, TransformerImpl& m) {
  std::vector<Metric> ms = {metric};
  if (metric != Metric::Loss) ms.push_back(Metric::Loss);
  const auto r = measure(m, set, ms, options);
  rows.push_back({stage, m.n_active_heads(), m.n_parameters(), r.at(metric).value(), r.at(Metric::Loss).value()});
}

void StageTable::print(std::ostream& out) const {
  out << std::left << std::setw(12) << "stage" << std::right << std::setw(8) << "heads" << std::setw(12) << "params"
      << std::setw(12) << to_string(metric) << std::setw(10) << "loss" << "\n";
  for (const auto& r : rows)
    out << std::left << std::setw(12) << r.stage << std::right << std::setw(8) << r.heads << std::setw(12) << r.params
        << std::setw(12) << fmt(r.metric) << std::setw(10) << fmt(r.loss) << "\n";
}

nlohmann::json StageTable::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows)
    j.push_back({{"stage", r.stage}, {"heads", r.heads}, {"params", r.params}, {"metric", r.metric}, {"loss", r.loss}});
  return j;
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
