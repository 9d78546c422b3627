// Levelled stderr logging.
#include "headprune/util/log.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <stdexcept>

#include <c10/util/Exception.h>

#include "headprune/util/names.h"

namespace hp {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Info)};
std::mutex g_mu;
std::string g_prefix;  // guarded by g_mu
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_log_prefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_prefix = prefix;
}

const NameTable<LogLevel>& log_level_names() {
  static const NameTable<LogLevel> t{"log level",
                                     {{LogLevel::Error, {"error"}},
                                      {LogLevel::Warn, {"warn"}},
                                      {LogLevel::Info, {"info"}},
                                      {LogLevel::Debug, {"debug"}}}};
  return t;
}
LogLevel parse_log_level(const std::string& s) { return log_level_names().parse(s); }

void log(LogLevel level, const std::string& tag, const std::string& msg) {
  if (static_cast<int>(level) > g_level.load()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  std::cerr << "[" << tag << "] " << g_prefix << (level == LogLevel::Warn ? "warning: " : level == LogLevel::Error ? "error: " : "")
            << msg << "\n";
}

std::string error_message(const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string msg = torch_error ? torch_error->what_without_backtrace() : e.what();
  for (const char* mark : {"Exception raised from", "frame #0"}) {
    const auto at = msg.find(mark);
    if (at != std::string::npos) msg.erase(at);
  }
  if (torch_error || msg.size() != std::string(e.what()).size()) msg = msg.substr(0, msg.find('\n'));
  while (!msg.empty() && (msg.back() == ' ' || msg.back() == '\n')) msg.pop_back();
  return msg;
}

}  // namespace hp
