// Terminal progress bar (see header).
#include "headprune/util/progress.h"

#include <cstdio>

#include <unistd.h>

namespace hp {

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), tty_(::isatty(2) == 1),
      start_(std::chrono::steady_clock::now()),
      // a terminal draws at once; a log's first plain line comes after one interval
      last_draw_(tty_ ? start_ - std::chrono::seconds(1) : start_) {}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::format_duration(double s) {
  char buf[32];
  const auto t = static_cast<long long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%llds", t);
  return buf;
}

void ProgressBar::update(int64_t done, const std::string& extra) {
  if (finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(30000);
  if (now - last_draw_ < interval && (!tty_ || done < total_)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  const double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 0.0;
  const int width = 24, filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>';
  bar.resize(width, ' ');
  const std::string eta = rate > 0 ? format_duration(static_cast<double>(total_ - done) / rate) : "?";
  if (tty_)
    std::fprintf(stderr, "\r[%s] %lld/%lld [%s] %3.0f%% %.1f %s/s ETA %s %s\033[K", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), bar.c_str(), 100.0 * frac, rate,
                 unit_.c_str(), eta.c_str(), extra.c_str());
  else
    std::fprintf(stderr, "[%s] %lld/%lld %3.0f%% %.2f %s/s elapsed %s ETA %s %s\n", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), 100.0 * frac, rate, unit_.c_str(),
                 format_duration(elapsed).c_str(), eta.c_str(), extra.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!tty_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace hp
