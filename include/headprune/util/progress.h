// A progress bar on stderr for long runs: rate and ETA, redrawn in place at most ~5 times a
// second when stderr is a terminal; when stderr is a file or pipe (a run in the background), one
// plain line at most every 30 s instead, so that a log shows how far a long run has got.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hp {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit = "it");
  ~ProgressBar();
  // done: items finished so far; extra: text appended after the rate (e.g. "loss 2.31").
  void update(int64_t done, const std::string& extra = "");
  void finish();
  static std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"

 private:
  std::string label_, unit_;
  int64_t total_;
  bool tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace hp
