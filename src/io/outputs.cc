// The output policy (see header).
#include "headprune/io/outputs.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/io/files.h"
#include "headprune/util/dist.h"
#include "headprune/version.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hp {
namespace fs = std::filesystem;

namespace {

std::string real(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

std::string parent_of(const std::string& path) {
  const std::string p = fs::path(without_trailing_slashes(path)).parent_path().string();
  return p.empty() ? "." : p;
}

// "the output X" / "--out X" for messages.
std::string named(const NamedPath& p) { return p.what.empty() ? p.path : p.what + " " + p.path; }

void fsync_directory(const std::string& dir) {  // best effort: the renames reach the disk
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void rename_or_throw(const std::string& from, const std::string& to, const std::string& context) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw std::runtime_error(context + ": cannot rename " + from + " to " + to + " (" + errno_text() + ")");
}

// Puts directory `from` at `dst`: what is at dst goes to a backup name of this run first and is removed
// after the swap (put back if the swap fails), so dst is always complete or absent.
void swap_into_place(const std::string& from, const std::string& dst) {
  std::string old;
  if (!path_type(dst).empty()) {
    old = scratch_name(dst, "old");
    rename_or_throw(dst, old, dst);
  }
  try {
    rename_or_throw(from, dst, dst);
  } catch (...) {
    if (!old.empty()) ::rename(old.c_str(), dst.c_str());  // the earlier one back
    throw;
  }
  fsync_directory(parent_of(dst));
  if (!old.empty()) remove_tree_or_throw(old, dst);
}

// A directory made here, with a name of this run (mkdir fails on anything that exists).
std::string make_scratch_directory(const std::string& beside, const std::string& tag) {
  for (int attempt = 0;; ++attempt) {
    const std::string d = scratch_name(beside, tag);
    if (::mkdir(d.c_str(), 0755) == 0) return d;
    if (errno != EEXIST || attempt > 16)
      throw std::runtime_error(without_trailing_slashes(beside) + ": cannot create a directory beside it (" +
                               errno_text() + ")");
  }
}
}  // namespace

std::string resolved_path(const std::string& path) {
  fs::path p = fs::path(path.empty() ? "." : path);
  if (p.is_relative()) p = fs::current_path() / p;
  // The longest prefix that exists is resolved by realpath; the rest is normalized as written.
  fs::path head = p, tail;
  std::string r;
  while (true) {
    r = real(head.string());
    if (!r.empty() || !head.has_relative_path()) break;
    tail = head.filename() / tail;
    head = head.parent_path();
  }
  fs::path out = r.empty() ? fs::path("/") : fs::path(r);
  for (const auto& c : tail) {
    if (c == "." || c.empty()) continue;
    if (c == "..") out = out.parent_path();
    else out /= c;
  }
  std::string s = out.lexically_normal().string();
  return without_trailing_slashes(s.empty() ? "/" : s);
}

bool path_within(const std::string& a, const std::string& b) {
  const std::string ra = resolved_path(a), rb = resolved_path(b);
  if (ra == rb) return true;
  if (rb == "/") return true;
  return ra.size() > rb.size() && ra.compare(0, rb.size(), rb) == 0 && ra[rb.size()] == '/';
}

void check_outputs_apart(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  const char* home = std::getenv("HOME");
  const std::string cwd = resolved_path(".");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& o = outputs[i];
    if (o.path.empty()) continue;
    const std::string r = resolved_path(o.path);
    if (r == "/") throw std::invalid_argument(named(o) + ": is the root directory; headprune never writes over it");
    if (home && *home && r == resolved_path(home))
      throw std::invalid_argument(named(o) + ": is the home directory; headprune never writes over it");
    if (path_within(cwd, r))
      throw std::invalid_argument(named(o) + ": is the working directory or holds it; choose an output below it");
    for (const auto& in : inputs) {
      if (in.path.empty()) continue;
      if (path_within(o.path, in.path))
        throw std::invalid_argument(named(o) + ": is " + (resolved_path(o.path) == resolved_path(in.path) ? "" : "inside ") +
                                    named(in) + ", which this command reads; choose an output outside it");
      if (path_within(in.path, o.path))
        throw std::invalid_argument(named(o) + ": holds " + named(in) +
                                    ", which this command reads; choose an output that does not contain it");
    }
    for (size_t j = 0; j < i; ++j) {
      const auto& p = outputs[j];
      if (p.path.empty()) continue;
      if (path_within(o.path, p.path) || path_within(p.path, o.path))
        throw std::invalid_argument(named(o) + " and " + named(p) +
                                    (r == resolved_path(p.path) ? " are the same path" : ": one lies inside the other") +
                                    "; give each output its own place");
    }
  }
}

std::string path_type(const std::string& path) {
  struct stat st {};
  if (::lstat(without_trailing_slashes(path).c_str(), &st) != 0) return "";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a device";
}

std::optional<std::string> output_kind(const std::string& dir) {
  const std::string marker = join_path(without_trailing_slashes(dir), kOutputMarker);
  if (path_type(dir) != "a directory" || path_type(marker) != "a regular file") return std::nullopt;
  try {
    const auto j = parse_json(read_file(marker, 4096), marker);
    if (j.is_object() && j.contains("kind") && j["kind"].is_string()) return j["kind"].get<std::string>();
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

void write_output_marker(const std::string& dir, const std::string& kind) {
  nlohmann::json j = {{"kind", kind}, {"written_by", std::string("headprune ") + HP_VERSION_STRING}};
  write_file_atomic_local(join_path(dir, kOutputMarker), j.dump() + "\n");  // rank 0's own step: no collective
}

void replace_directory(const std::string& dst_in, const std::function<void(const std::string& tmp)>& fill) {
  const std::string dst = without_trailing_slashes(dst_in);
  collective_write([&] {
    const std::string tmp = make_scratch_directory(dst, "tmp");
    try {
      fill(tmp);
    } catch (...) {
      remove_tree(tmp);
      throw;
    }
    try {
      swap_into_place(tmp, dst);
    } catch (...) {
      remove_tree(tmp);
      throw;
    }
  });
}

std::string PathLock::lock_path(const std::string& path) {
  return join_path(parent_of(path), "." + fs::path(without_trailing_slashes(path)).filename().string() + ".headprune-lock");
}

PathLock::PathLock(const std::string& path) : lock_path_(lock_path(path)) {
  if (!dist::is_main()) return;
  const std::string parent = parent_of(lock_path_);
  if (path_type(parent).empty()) make_directories(parent);
  for (int attempt = 0; attempt < 100; ++attempt) {
    // A lock file is a regular file holding a pid (or nothing yet); anything else at that name is not
    // ours to open, truncate or remove.
    const std::string type = path_type(lock_path_);
    if (!type.empty() && type != "a regular file")
      throw std::runtime_error(lock_path_ + ": is " + type + ", not headprune's lock file; remove it or choose another output");
    if (type == "a regular file") {
      std::string content;
      try {
        content = read_file(lock_path_, 64);
      } catch (const std::exception&) {
        throw std::runtime_error(lock_path_ + ": is not headprune's lock file (it holds more than a pid); remove it or "
                                              "choose another output");
      }
      if (content.find_first_not_of("0123456789") != std::string::npos)
        throw std::runtime_error(lock_path_ + ": is not headprune's lock file (it holds more than a pid); remove it or "
                                              "choose another output");
    }
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
      throw std::runtime_error(without_trailing_slashes(path) + ": cannot create its lock file " + lock_path_ + " (" +
                               errno_text() + ")");
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

void OutputDir::check_target() const {
  const std::string type = path_type(final_);
  const std::string name = options_.what.empty() ? final_ : options_.what + " " + final_;
  if (type.empty()) return;
  if (type != "a directory")
    throw std::runtime_error(name + ": exists and is " + type + "; headprune writes its output directories only "
                             "where nothing is or over its own earlier output, never over " + type);
  if (is_empty_or_missing_directory(final_)) return;
  const auto kind = output_kind(final_);
  if (!kind)
    throw std::runtime_error(name + ": is a directory that holds files and is not a headprune output (no " +
                             kOutputMarker + "); headprune never replaces it, even with " + options_.flag +
                             ": choose another output or remove it yourself");
  if (*kind != options_.kind)
    throw std::runtime_error(name + ": holds a headprune '" + *kind + "' output, not a '" + options_.kind +
                             "' one; choose another output");
  if (!options_.overwrite && !options_.replace_own)
    throw std::runtime_error(name + ": holds an earlier '" + *kind + "' output; pass " + options_.flag +
                             " to replace it as a whole, or choose another output");
}

OutputDir::OutputDir(const std::string& out, const Options& options)
    : final_(without_trailing_slashes(out)), options_(options) {
  if (final_.empty()) throw std::invalid_argument("an output directory is required (" + options.what + ")");
  if (options_.kind.empty()) throw std::logic_error("OutputDir: no kind");
  check_outputs_apart({{final_, options_.what}}, options_.inputs);
  check_target();  // before the lock: a refusal leaves nothing behind
  if (dist::is_main()) {
    lock_.emplace(final_);
    check_target();  // again, now that no other headprune writes it
    remove_stale_scratch(final_, kOutputMarker);
    staging_ = make_scratch_directory(final_, "partial");
    staged_as_ = std::make_unique<StagedAs>(staging_, final_);
    write_output_marker(staging_, options_.kind);
  } else {
    committed_ = true;  // rank 0 stages and commits; the others read its staging directory
  }
  if (dist::active()) staging_ = dist::all_gather(staging_).front();
}

OutputDir::~OutputDir() {
  if (!committed_ && !staging_.empty()) remove_tree(staging_);
}

void OutputDir::commit() {
  collective_write([&] {  // on rank 0; the others wait for it
    check_target();  // what is at OUT may have changed while the job ran
    swap_into_place(staging_, final_);
  });
  staged_as_.reset();
  committed_ = true;
}

ScratchDir::ScratchDir(const std::string& tag, const std::string& parent) {
  if (dist::is_main()) {  // the other ranks use rank 0's (the machine's processes share it)
    std::string dir = parent;
    if (dir.empty()) {
      const char* t = std::getenv("TMPDIR");
      dir = t && *t ? t : "/tmp";
    }
    std::string templ = join_path(dir, "headprune-" + tag + "-XXXXXX");
    if (!::mkdtemp(templ.data())) throw std::runtime_error(dir + ": cannot create a scratch directory (" + errno_text() + ")");
    path_ = templ;
    owner_ = true;
    write_output_marker(path_, "scratch");
  }
  if (dist::active()) path_ = dist::all_gather(path_).front();
}

ScratchDir ScratchDir::beside(const std::string& path, const std::string& tag) {
  ScratchDir d;
  if (dist::is_main()) {
    remove_stale_scratch(path, kOutputMarker);
    d.path_ = make_scratch_directory(path, tag);
    d.owner_ = true;
    write_output_marker(d.path_, "scratch");
  }
  if (dist::active()) d.path_ = dist::all_gather(d.path_).front();
  return d;
}

ScratchDir::~ScratchDir() {
  if (owner_) remove_tree(path_);
}

namespace {
void check_file_target(const OutputFile& f) {
  const std::string path = without_trailing_slashes(f.path);
  const std::string name = f.what.empty() ? path : f.what + " " + path;
  const std::string type = path_type(path);
  if (type.empty()) {  // a new file; missing directories above it are made when it is written
    std::string parent = parent_of(path);
    while (path_type(parent).empty() && parent != parent_of(parent)) parent = parent_of(parent);
    if (const std::string t = path_type(parent); !t.empty() && t != "a directory")
      throw std::runtime_error(name + ": " + parent + " is " + t + ", not a directory");
    return;
  }
  if (type != "a regular file")
    throw std::runtime_error(name + ": exists and is " + type + "; headprune writes " + f.kind +
                             " only where nothing is or over its own earlier one, never over " + type);
  if (f.ours) {
    if (!f.ours(path))
      throw std::runtime_error(name + ": exists and is not " + f.kind + " written by headprune; headprune never "
                               "replaces it: choose another name or remove it yourself");
  } else if (!f.overwrite) {
    throw std::runtime_error(name + ": exists; pass " + f.flag + " to replace it, or choose another name");
  }
}
}  // namespace

void check_output_file(const OutputFile& f, const std::vector<NamedPath>& inputs) {
  if (f.path.empty()) return;
  check_outputs_apart({{f.path, f.what}}, inputs);
  check_file_target(f);
}

void write_output_file(const OutputFile& f, const std::string& content) {
  collective_write([&] {
    check_file_target(f);
    make_directories(parent_of(without_trailing_slashes(f.path)));
    write_file_atomic(f.path, content);
  });
}

std::function<bool(const std::string&)> json_format_is(const std::string& tag_prefix) {
  return [tag_prefix](const std::string& path) {
    try {
      const auto j = parse_json(read_file(path, 1ull << 28), path);  // a larger file is not one of ours
      return j.is_object() && j.contains("format") && j["format"].is_string() &&
             j["format"].get<std::string>().compare(0, tag_prefix.size(), tag_prefix) == 0;
    } catch (const std::exception&) {
      return false;
    }
  };
}

std::function<bool(const std::string&)> file_head_contains(const std::string& needle) {
  return [needle](const std::string& path) { return read_file_head(path, 4096).find(needle) != std::string::npos; };
}

}  // namespace hp
