// Shared subcommand options and progress on stderr (see header).
#include "common.h"

#include <memory>
#include <ostream>

#include "headprune/util/dist.h"
#include "headprune/util/progress.h"

namespace hp::cli {

void add_data_options(CLI::App* sub, DataSource& d) {
  sub->add_option("--config,--data", d.config,
                  "run config whose data section to use (default: the built-in synthetic task)");
  sub->add_option("--split", d.split, "train, valid or test")
      ->check(CLI::IsMember({"train", "valid", "test"}))
      ->capture_default_str();
  sub->add_option("--data-root", d.data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_option("--max-examples,--max-sentences", d.max_examples, "use only the first N examples (0 = all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--synthetic", d.synthetic_examples, "examples of the synthetic task when no --config")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--calibration", d.calibration,
                  "calibration text file (read with the model's tokenizer) instead of a data config's split; "
                  "'random' for random token ids (speed and memory checks only)");
  sub->add_option("--calibration-length", d.calibration_length, "tokens per calibration sample")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  sub->add_option("--calibration-samples", d.calibration_samples, "calibration samples")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
}

void add_score_split_option(CLI::App* sub, DataSource& d) {
  sub->add_option("--score-split", d.score_split,
                  "the split head importance is computed on (default: --split); e.g. select heads on valid, "
                  "report on test")
      ->check(CLI::IsMember({"train", "valid", "test"}));
}

void add_finetune_options(CLI::App* sub, FinetuneOptions& f, DataSource& d) {
  sub->add_option("--finetune-steps", f.steps, "recovery fine-tuning steps after pruning (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--finetune-lr", f.lr, "fine-tuning learning rate (default: the run config's)");
  sub->add_option("--finetune-batch-tokens", f.batch_tokens, "tokens per fine-tuning batch (default: the run config's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--synthetic-train", d.synthetic_train, "training examples of the synthetic task for fine-tuning")
      ->capture_default_str();
}

namespace {
// One progress bar per phase, replaced when the phase changes and closed when it completes.
struct PhaseBars {
  std::string phase;
  std::unique_ptr<ProgressBar> bar;
  void update(const JobEvents::Progress& p) {
    if (p.phase != phase || !bar) {
      bar = std::make_unique<ProgressBar>(p.phase, p.total, p.unit);
      phase = p.phase;
    }
    bar->update(p.done, p.extra);
    if (p.done >= p.total) {
      bar->finish();
      bar.reset();
      phase.clear();
    }
  }
};
}  // namespace

CLI::Option* add_out_option(CLI::App* sub, std::string& dir, bool& overwrite, const std::string& help) {
  sub->add_flag("--overwrite", overwrite, "replace a non-empty output directory as a whole (refused without it)");
  return sub->add_option("--out", dir, help);
}

bool is_secondary_rank() {
  try {
    return dist::env_from_environment().rank != 0;
  } catch (const std::exception&) {
    return false;  // start() reports the bad variable
  }
}

JobEvents stderr_events(Context& ctx) {
  JobEvents ev;
  auto bars = std::make_shared<PhaseBars>();
  if (is_secondary_rank()) return ev;  // several processes: rank 0 reports for all
  ev.progress = [bars](const JobEvents::Progress& p) { bars->update(p); };
  std::ostream* err = &ctx.err;
  ev.note = [err](const std::string& tag, const std::string& line) { *err << "[" << tag << "] " << line << "\n"; };
  return ev;
}

}  // namespace hp::cli
