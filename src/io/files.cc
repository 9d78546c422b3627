// File helpers (see header).
#include "headprune/io/files.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <vector>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/util/dist.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

namespace hp {
namespace fs = std::filesystem;

namespace {
// In a run of several processes only rank 0 writes (util/dist.h); the others' locks and staging
// directories are no-ops, so they never race rank 0 for the same paths.
bool writes_files() { return dist::is_main(); }

// A write as every rank sees it: rank 0 writes, and at the outermost write (not the files a
// replace_directory fills) the others wait until it has, so they can read it next.
int g_write_depth = 0;
template <typename F>
void rank0_writes(F&& write) {
  if (!dist::active()) {
    write();
    return;
  }
  if (g_write_depth > 0) {  // inside rank 0's outer write
    write();
    return;
  }
  if (dist::is_main()) {
    ++g_write_depth;
    try {
      write();
    } catch (...) {
      --g_write_depth;
      throw;
    }
    --g_write_depth;
  }
  dist::barrier();
}
}  // namespace

std::string read_file(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw std::runtime_error(path + ": is a directory, expected a file");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                             " this reader accepts (not the file you meant?)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return ss.str();
}

namespace {
void write_file_atomic_here(const std::string& path, const std::function<void(std::ostream&)>& write) {
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
}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  rank0_writes([&] { write_file_atomic_here(path, write); });
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
  if (!writes_files()) return;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path)) throw std::runtime_error(path + ": cannot create directory (" + ec.message() + ")");
}

bool is_empty_or_missing_directory(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return true;
  return fs::is_directory(path, ec) && fs::is_empty(path, ec);
}

namespace {
bool entry_of(const std::string& dir, const char* name, int depth, DirEntry& e) {
  e.name = name;
  e.path = join_path(dir, e.name);
  e.depth = depth;
  struct stat st {};
  if (::lstat(e.path.c_str(), &st) != 0) return false;  // gone meanwhile
  e.is_dir = S_ISDIR(st.st_mode);
  e.is_file = S_ISREG(st.st_mode);
  e.size = e.is_file ? static_cast<uint64_t>(st.st_size) : 0;
  return true;
}

// Entries of dir sorted by name; false when it cannot be opened.
bool read_directory(const std::string& dir, int depth, std::vector<DirEntry>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  while (const dirent* de = ::readdir(d)) {
    if (std::strcmp(de->d_name, ".") == 0 || std::strcmp(de->d_name, "..") == 0) continue;
    DirEntry e;
    if (entry_of(dir, de->d_name, depth, e)) out.push_back(std::move(e));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return true;
}

void walk(const std::string& dir, int depth, const std::function<bool(const DirEntry&)>& visit) {
  std::vector<DirEntry> entries;
  if (!read_directory(dir, depth, entries)) return;
  for (const auto& e : entries)
    if (visit(e) && e.is_dir) walk(e.path, depth + 1, visit);
}
}  // namespace

std::vector<DirEntry> list_directory(const std::string& dir) {
  std::vector<DirEntry> out;
  if (!read_directory(dir, 0, out)) throw std::runtime_error(dir + ": cannot read the directory (" + std::strerror(errno) + ")");
  return out;
}

void walk_directory(const std::string& dir, const std::function<bool(const DirEntry&)>& visit) { walk(dir, 0, visit); }

std::string remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? "" : path + ": " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) {
    std::vector<DirEntry> entries;
    if (!read_directory(path, 0, entries)) return path + ": cannot read the directory (" + std::strerror(errno) + ")";
    for (const auto& e : entries)
      if (auto err = remove_tree(e.path); !err.empty()) return err;
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return path + ": " + std::strerror(errno);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return path + ": " + std::strerror(errno);
  }
  return "";
}

void remove_tree_or_throw(const std::string& path, const std::string& context) {
  if (auto err = remove_tree(path); !err.empty())
    throw std::runtime_error((context.empty() ? "" : context + ": ") + "cannot remove " + err);
}

void replace_directory(const std::string& dst, const std::function<void(const std::string& tmp)>& fill) {
  rank0_writes([&] {
    const std::string tmp = dst + ".tmp", old = dst + ".old";
    remove_tree_or_throw(tmp);
    fill(tmp);
    remove_tree_or_throw(old);
    if (fs::exists(dst)) fs::rename(dst, old);
    fs::rename(tmp, dst);
    remove_tree_or_throw(old);
  });
}

namespace {
std::string without_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}
}  // namespace

PathLock::PathLock(const std::string& path) : lock_path_(without_trailing_slashes(path) + ".lock") {
  if (!writes_files()) return;
  const std::string parent = fs::path(lock_path_).parent_path().string();
  if (!parent.empty()) make_directories(parent);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(lock_path_ + ": cannot create the lock file (" + std::strerror(errno) + ")");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {0};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      const std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
      throw std::runtime_error(without_trailing_slashes(path) + ": another process (pid " + holder +
                               ") is writing it (lock " + lock_path_ + "); wait for it or choose another output");
    }
    // The holder before us may have removed the file between our open and our lock: lock the file
    // that is at the path now.
    struct stat at_fd {}, at_path {};
    if (::fstat(fd, &at_fd) == 0 && ::stat(lock_path_.c_str(), &at_path) == 0 && at_fd.st_ino == at_path.st_ino &&
        at_fd.st_dev == at_path.st_dev) {
      const std::string pid = std::to_string(::getpid());
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) { /* the pid is informative only */ }
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
  throw std::runtime_error(lock_path_ + ": could not take the lock (the file keeps changing)");
}

PathLock::~PathLock() {
  if (fd_ >= 0) {
    ::unlink(lock_path_.c_str());  // while still holding it: a waiting opener re-checks the inode
    ::close(fd_);
  }
}

OutputDir::OutputDir(const std::string& out, const Options& options)
    : final_(without_trailing_slashes(out)), staging_(final_ + ".partial"), lock_(final_) {
  if (!writes_files()) {
    committed_ = true;  // nothing staged, nothing to remove
    return;
  }
  std::error_code ec;
  if (fs::exists(final_, ec) && !fs::is_directory(final_, ec))
    throw std::runtime_error(final_ + ": exists and is not a directory");
  if (!is_empty_or_missing_directory(final_) && !options.overwrite &&
      !(options.replaceable && options.replaceable(final_)))
    throw std::runtime_error(final_ + ": the output directory is not empty; choose another or pass " + options.flag +
                             " to replace it as a whole");
  remove_tree(staging_);
  make_directories(staging_);
}

OutputDir::~OutputDir() {
  if (!committed_) remove_tree(staging_);
}

void OutputDir::commit() {
  replace_directory(final_, [&](const std::string& tmp) {  // on rank 0; the others wait for it
    remove_tree_or_throw(tmp);
    fs::rename(staging_, tmp);
  });
  committed_ = true;
}

int64_t json_int(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
    throw std::invalid_argument(what + " must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

nlohmann::json parse_json(const std::string& text, const std::string& source, bool allow_comments) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys;  // the keys of each object being parsed, innermost last
  std::string duplicate;
  const auto callback = [&](int, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) {
      keys.emplace_back();
    } else if (event == Event::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == Event::key && !keys.empty() && duplicate.empty()) {
      if (!keys.back().insert(parsed.get<std::string>()).second) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, callback, true, allow_comments);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(source + ": not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) throw std::runtime_error(source + ": duplicate key '" + duplicate + "' (which one is meant?)");
  return j;
}

nlohmann::json read_json_file(const std::string& path, bool allow_comments) {
  return parse_json(read_file(path), path, allow_comments);
}

void write_json_file(const std::string& path, const nlohmann::json& j, int indent) {
  write_file_atomic(path, j.dump(indent) + "\n");
}

}  // namespace hp
