// Levelled stderr logging.
#include "headprune/util/log.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <stdexcept>

namespace hp {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Info)};
std::mutex g_mu;
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

LogLevel parse_log_level(const std::string& s) {
  if (s == "error") return LogLevel::Error;
  if (s == "warn") return LogLevel::Warn;
  if (s == "info") return LogLevel::Info;
  if (s == "debug") return LogLevel::Debug;
  throw std::invalid_argument("unknown log level '" + s + "' (expected error, warn, info or debug)");
}

void log(LogLevel level, const std::string& tag, const std::string& msg) {
  if (static_cast<int>(level) > g_level.load()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  std::cerr << "[" << tag << "] " << (level == LogLevel::Warn ? "warning: " : level == LogLevel::Error ? "error: " : "")
            << msg << "\n";
}

}  // namespace hp
