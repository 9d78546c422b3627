// Shared subcommand options and progress on stderr (see header).
#include "common.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>

#include "headprune/util/dist.h"
#include "headprune/util/progress.h"

namespace hp::cli {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The input as the user typed it, cut short: a message never grows with its input.
std::string as_typed(const std::string& s) { return "'" + (s.size() > 24 ? s.substr(0, 21) + "..." : s) + "'"; }

std::optional<long long> parse_integer(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return std::nullopt;
  return v;
}

std::optional<double> parse_real(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

CLI::Validator int_range(int64_t lo, int64_t hi) {
  const std::string desc = hi == std::numeric_limits<int64_t>::max()
                               ? ">= " + std::to_string(lo)
                               : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, desc](std::string& in) -> std::string {
        const auto v = parse_integer(in);
        if (!v || *v < lo || *v > hi) return "must be an integer " + desc + ", not " + as_typed(in);
        return "";
      },
      desc);
}

CLI::Validator at_least(int64_t lo) { return int_range(lo, std::numeric_limits<int64_t>::max()); }

CLI::Validator real_range(double lo, double hi, bool lo_open, bool hi_open) {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  std::string desc = "a finite number";
  if (has_lo && has_hi) {
    desc = "in " + std::string(lo_open ? "(" : "[") + number(lo) + ", " + number(hi) + (hi_open ? ")" : "]");
  } else if (has_lo) {
    desc = (lo_open ? "> " : ">= ") + number(lo);
  } else if (has_hi) {
    desc = (hi_open ? "< " : "<= ") + number(hi);
  }
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        const auto v = parse_real(in);
        const bool ok = v && (!has_lo || (lo_open ? *v > lo : *v >= lo)) && (!has_hi || (hi_open ? *v < hi : *v <= hi));
        if (!ok) return "must be " + std::string(has_lo || has_hi ? "a number " : "") + desc + ", not " + as_typed(in);
        return "";
      },
      desc);
}

CLI::Validator positive_real() { return real_range(0, std::numeric_limits<double>::infinity(), true); }
CLI::Validator finite_real() {
  return real_range(-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
}

void add_data_options(CLI::App* sub, DataSource& d) {
  sub->add_option("--config,--data", d.config,
                  "run config whose data section to use (default: the built-in synthetic task)");
  sub->add_option("--split", d.split, "train, valid or test")
      ->check(CLI::IsMember({"train", "valid", "test"}))
      ->capture_default_str();
  sub->add_option("--data-root", d.data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_option("--max-examples,--max-sentences", d.max_examples, "use only the first N examples (0 = all)")
      ->check(at_least(0));
  sub->add_option("--synthetic", d.synthetic_examples, "examples of the synthetic task when no --config")
      ->check(at_least(1))
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
      ->check(at_least(0))
      ->capture_default_str();
  sub->add_option("--finetune-lr", f.lr, "fine-tuning learning rate (default: the run config's)")
      ->check(positive_real());
  sub->add_option("--finetune-batch-tokens", f.batch_tokens, "tokens per fine-tuning batch (default: the run config's)")
      ->check(at_least(1));
  sub->add_option("--distill-weight", f.distill_weight,
                  "fine-tune with distillation from the unpruned model: (1 - w) * task loss + w * T^2 * KL (0 = none)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--distill-temperature", f.distill_temperature, "distillation temperature T")
      ->check(positive_real())
      ->capture_default_str();
  sub->add_option("--distill-hidden", f.distill_hidden_weight,
                  "add this weight times the MSE of the hidden states entering every attention layer, student vs "
                  "unpruned model (CoFi's layer-wise distillation; 0 = none)")
      ->check(real_range(0, std::numeric_limits<double>::infinity()))
      ->capture_default_str();
  sub->add_option("--synthetic-train", d.synthetic_train, "training examples of the synthetic task for fine-tuning")
      ->check(at_least(1))
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
