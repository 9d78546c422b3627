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
#include <random>
#include <set>
#include <vector>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/util/dist.h"
#include "headprune/util/mapped_files.h"

#include <fcntl.h>
#include <signal.h>
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
}  // namespace

void collective_write(const std::function<void()>& write) {
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

namespace {
std::string too_large(const std::string& path, uint64_t bytes, uint64_t max_bytes, bool at_least) {
  return path + ": " + (at_least ? "more than " : "") + std::to_string(bytes) + " bytes, more than the " +
         std::to_string(max_bytes) + " this reader accepts (not the file you meant?)";
}
}  // namespace

void read_chunks(const std::string& path, const std::function<void(const char*, size_t)>& sink, uint64_t max_bytes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw std::runtime_error(path + ": is a directory, expected a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes)
    throw std::runtime_error(too_large(path, static_cast<uint64_t>(st.st_size), max_bytes, false));
  // The bound holds while reading too: a device (/dev/zero), a pipe or a growing file has no size to ask.
  std::vector<char> buf(1 << 16);
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(path + ": read error (" + std::strerror(errno) + ")");
    }
    if (n == 0) return;
    total += static_cast<uint64_t>(n);
    if (total > max_bytes) throw std::runtime_error(too_large(path, max_bytes, max_bytes, true));
    sink(buf.data(), static_cast<size_t>(n));
  }
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  std::string out;
  read_chunks(path, [&](const char* p, size_t n) { out.append(p, n); }, max_bytes);
  return out;
}

std::string read_file_head(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    out.resize(max_bytes);
    size_t got = 0;
    while (got < max_bytes) {
      const ssize_t n = ::read(fd, out.data() + got, max_bytes - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
  }
  ::close(fd);
  return out;
}

namespace {
std::vector<std::pair<std::string, std::string>>& staged() {  // (staging, final), innermost last
  static thread_local std::vector<std::pair<std::string, std::string>> s;
  return s;
}
}  // namespace

StagedAs::StagedAs(std::string staging, std::string final) : staging_(std::move(staging)) {
  staged().emplace_back(staging_, std::move(final));
}
StagedAs::~StagedAs() {
  auto& s = staged();
  for (auto it = s.rbegin(); it != s.rend(); ++it)
    if (it->first == staging_) {
      s.erase(std::next(it).base());
      break;
    }
}

std::string display_path(const std::string& path) {
  for (auto it = staged().rbegin(); it != staged().rend(); ++it) {
    const auto& [staging, final] = *it;
    if (path.compare(0, staging.size(), staging) == 0 && (path.size() == staging.size() || path[staging.size()] == '/'))
      return final + path.substr(staging.size()) + " (staged in " + staging + ")";
  }
  return path;
}

std::string errno_text() { return std::strerror(errno); }

std::string without_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

namespace {

void write_file_atomic_here(const std::string& path, const std::function<void(std::ostream&)>& write) {
  // The scratch file is created with O_EXCL under a name unique to this run: an existing file (a user's,
  // or another run's) is never opened, let alone truncated.
  const std::string shown = display_path(path);
  check_mapped_files();  // nothing computed from a checkpoint truncated under us is published
  std::string tmp;
  for (int attempt = 0;; ++attempt) {
    tmp = scratch_name(path, "tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    if (errno != EEXIST || attempt > 16)
      throw std::runtime_error(shown + ": cannot create a file beside it (" + errno_text() + ")");
  }
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw std::runtime_error(shown + ": cannot open '" + tmp + "' for writing (" + errno_text() + ")");
      write(out);
      out.flush();
      if (!out) throw std::runtime_error(shown + ": write failed (" + errno_text() + "; disk full?)");
      out.close();
      if (!out) throw std::runtime_error(shown + ": write failed on close (" + errno_text() + "; disk full?)");
    }
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(shown + ": cannot reopen the written file (" + errno_text() + ")");
    const int synced = ::fsync(fd);
    const int sync_errno = errno;
    ::close(fd);
    if (synced != 0) throw std::runtime_error(shown + ": cannot sync the written file to disk (" + std::strerror(sync_errno) + ")");
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error(shown + ": cannot move the written file into place (" + errno_text() + ")");
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename itself reaches the disk with the directory (best effort: some file systems refuse it).
  const std::string parent = fs::path(path).parent_path().string();
  const int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}
}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  collective_write([&] { write_file_atomic_here(path, write); });
}

void write_file_atomic_local(const std::string& path, const std::string& content) {
  write_file_atomic_here(path, [&](std::ostream& o) { o.write(content.data(), static_cast<std::streamsize>(content.size())); });
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
  if (ec || !fs::is_directory(path))
    throw std::runtime_error(display_path(path) + ": cannot create directory (" + ec.message() + ")");
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

namespace {
std::string random_hex(int digits) {
  static std::mt19937_64 gen{std::random_device{}() ^ (static_cast<uint64_t>(::getpid()) << 32)};
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < digits; ++i) s += hex[gen() & 15];
  return s;
}

// DIR and NAME of a path ("." for a bare name).
std::pair<std::string, std::string> split_parent(const std::string& path) {
  const fs::path p(without_trailing_slashes(path));
  std::string dir = p.parent_path().string();
  return {dir.empty() ? "." : dir, p.filename().string()};
}

const std::string kScratchInfix = ".headprune-";
}  // namespace

std::string scratch_name(const std::string& path, const std::string& tag) {
  const auto [dir, name] = split_parent(path);
  return join_path(dir, "." + name + kScratchInfix + tag + "." + std::to_string(::getpid()) + "." + random_hex(8));
}

void remove_stale_scratch(const std::string& path, const std::string& marker) {
  if (!writes_files()) return;
  const auto [dir, name] = split_parent(path);
  const std::string prefix = "." + name + kScratchInfix;
  std::vector<DirEntry> entries;
  if (!read_directory(dir, 0, entries)) return;
  for (const auto& e : entries) {
    if (e.name.compare(0, prefix.size(), prefix) != 0) continue;
    // TAG.PID.RANDOM: TAG is letters, PID digits, RANDOM eight hex digits.
    const std::string rest = e.name.substr(prefix.size());
    const auto dot1 = rest.find('.'), dot2 = rest.rfind('.');
    if (dot1 == std::string::npos || dot2 == dot1 || rest.size() - dot2 - 1 != 8) continue;
    const std::string tag = rest.substr(0, dot1), pid_text = rest.substr(dot1 + 1, dot2 - dot1 - 1);
    if (tag == "lock" || tag.empty() || pid_text.empty() || pid_text.size() > 9 ||
        !std::all_of(pid_text.begin(), pid_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    if (e.is_dir) {
      if (!is_file(join_path(e.path, marker))) continue;
    } else if (!e.is_file) {
      continue;
    }
    remove_tree(e.path);
  }
}

nlohmann::json parse_json(const std::string& text, const std::string& source, bool allow_comments) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys;  // the keys of each object being parsed, innermost last
  std::string duplicate;
  const auto callback = [&](int depth, Event event, nlohmann::json& parsed) {
    // A nesting deeper than any real file is refused while parsing, before the tree grows deep: copying
    // or comparing one recurses per level (300,000 nested arrays in an unused key crashed every reader).
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
      throw std::runtime_error(source + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                               " levels (no config, tokenizer or plan file needs that many)");
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
