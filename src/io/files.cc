// File helpers (see header).
#include "headprune/io/files.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

namespace hp {
namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw std::runtime_error(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  static std::atomic<int> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw std::runtime_error(path + ": cannot open '" + tmp + "' for writing (" + std::strerror(errno) + ")");
      write(out);
      out.flush();
      if (!out) throw std::runtime_error(path + ": write failed (disk full?)");
    }
    int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw std::runtime_error(path + ": cannot rename temp file into place (" + ec.message() + ")");
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, [&](std::ostream& o) { o.write(content.data(), static_cast<std::streamsize>(content.size())); });
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string join_path(const std::string& dir, const std::string& file) {
  return (!dir.empty() && dir.back() == '/') ? dir + file : dir + "/" + file;
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

void make_directories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path)) throw std::runtime_error(path + ": cannot create directory (" + ec.message() + ")");
}

nlohmann::json read_json_file(const std::string& path, bool allow_comments) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text, nullptr, true, allow_comments);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j, int indent) {
  write_file_atomic(path, j.dump(indent) + "\n");
}

}  // namespace hp
