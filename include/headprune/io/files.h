// File helpers: whole-file reads with clear errors, and atomic writes (temp file in the
// same directory, flushed, then renamed over the target) so no reader ever sees half a file.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace hp {

std::string read_file(const std::string& path);  // throws std::runtime_error naming the path
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_file_atomic(const std::string& path, const std::string& content);
bool is_directory(const std::string& path);
bool is_file(const std::string& path);
std::string join_path(const std::string& dir, const std::string& file);  // dir/file, one slash
void make_directories(const std::string& path);  // mkdir -p; throws on failure

// JSON files: a parse error is std::runtime_error "PATH: not valid JSON: ...". With allow_comments,
// // and /* */ comments are skipped (run configs). Writes are atomic, indented, with a final newline.
nlohmann::json read_json_file(const std::string& path, bool allow_comments = false);
void write_json_file(const std::string& path, const nlohmann::json& j, int indent = 2);

}  // namespace hp
