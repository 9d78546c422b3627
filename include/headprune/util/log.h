// Levelled logging to stderr with a [tag] prefix; stdout is reserved for results.
#pragma once

#include <exception>
#include <string>

namespace hp {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

void set_log_level(LogLevel level);
// Text put before every message after the tag, e.g. "rank 1: " in a run of several processes.
void set_log_prefix(const std::string& prefix);
LogLevel log_level();
LogLevel parse_log_level(const std::string& s);  // error|warn|info|debug
template <typename E>
class NameTable;
const NameTable<LogLevel>& log_level_names();
void log(LogLevel level, const std::string& tag, const std::string& msg);

// An exception's message as users read it (the CLI after "error: ", the Python module's exceptions):
// LibTorch's errors without the C++ backtrace they carry, also when another error wrapped one, and
// then cut to their first line.
std::string error_message(const std::exception& e);
inline void log_info(const std::string& tag, const std::string& msg) { log(LogLevel::Info, tag, msg); }
inline void log_warn(const std::string& tag, const std::string& msg) { log(LogLevel::Warn, tag, msg); }
inline void log_debug(const std::string& tag, const std::string& msg) { log(LogLevel::Debug, tag, msg); }

}  // namespace hp
