// Shared subcommand options and progress on stderr (see header).
#include "common.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>

#include "headprune/util/dist.h"
#include "headprune/util/progress.h"

namespace hp::cli {

namespace {

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


}  // namespace

CLI::Validator in_range(const ValueRange& r, bool integer) {
  return CLI::Validator(
      [r, integer](std::string& in) -> std::string {
        std::optional<double> v;
        if (integer) {
          if (const auto i = parse_integer(in)) v = static_cast<double>(*i);
        } else {
          v = parse_finite_number(in);
        }
        if (!v || !r.contains(*v)) return "must be " + r.requirement(integer) + ", not " + as_typed(in);
        return "";
      },
      r.text());
}

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return in_range(ValueRange::between(static_cast<double>(lo), static_cast<double>(hi)), true);
}

CLI::Validator at_least(int64_t lo) { return in_range(ValueRange::at_least(static_cast<double>(lo)), true); }

CLI::Validator real_range(double lo, double hi, bool lo_open, bool hi_open) {
  return in_range(ValueRange::between(lo, hi, lo_open, hi_open), false);
}

CLI::Validator positive_real() { return in_range(ValueRange::positive(), false); }
CLI::Validator finite_real() { return in_range(ValueRange::any(), false); }

void add_data_options(CLI::App* sub, DataSource& d) {
  add_options(sub, d, data_source_table(),
              {"config", "split", "data_root", "max_examples", "synthetic_examples", "calibration", "calibration_length",
               "calibration_samples"});
}

void add_score_split_option(CLI::App* sub, DataSource& d) { add_options(sub, d, data_source_table(), {"score_split"}); }

void add_finetune_options(CLI::App* sub, FinetuneOptions& f, DataSource& d) {
  add_options(sub, f, finetune_option_table());
  add_options(sub, d, data_source_table(), {"synthetic_train"});
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
