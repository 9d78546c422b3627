// File helpers: whole-file reads with clear errors, and atomic writes (temp file in the
// same directory, flushed, then renamed over the target) so no reader ever sees half a file.
// In a run of several processes (util/dist.h) only rank 0 writes, and each write (file, replaced
// directory, committed OutputDir) is a collective: the other ranks skip it and wait until rank 0 is
// done, so all of them can read it next. Every rank must therefore make the same writes in the same
// order, as the library's jobs do. make_directories, PathLock and OutputDir's staging are rank 0's.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hp {

// Bounds on what a reader accepts before it allocates (a hostile or mistaken file is refused with its
// name, not after gigabytes): text/JSON files read whole, and lines of line-oriented corpora.
constexpr uint64_t kMaxTextFileBytes = 1ull << 30;  // 1 GiB
constexpr uint64_t kMaxLineBytes = 1ull << 24;      // 16 MiB


// Throws std::runtime_error naming the path; a file larger than max_bytes is refused before it is read.
std::string read_file(const std::string& path, uint64_t max_bytes = kMaxTextFileBytes);
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_file_atomic(const std::string& path, const std::string& content);
bool is_directory(const std::string& path);
bool is_file(const std::string& path);
std::string join_path(const std::string& dir, const std::string& file);  // dir/file, one slash
void make_directories(const std::string& path);  // mkdir -p; throws on failure

bool is_empty_or_missing_directory(const std::string& path);  // false for a file or a non-empty directory

// Directory listing, walking and removal by POSIX calls, not std::filesystem's iterators: PyTorch's
// 2.x wheels export their own statically linked copy of libstdc++'s filesystem code
// (pytorch/pytorch#133437), which a program linked to that libtorch calls instead of libstdc++'s,
// and its remove_all crashed (a call through a null pointer, PyTorch 2.11: docs/gpu.md).
struct DirEntry {
  std::string path, name;  // path = dir + "/" + name
  bool is_dir = false, is_file = false;  // symbolic links are neither (never followed)
  int depth = 0;                         // 0 for the entries of the directory walked
  uint64_t size = 0;                     // bytes of a regular file (from the same lstat)
};
// The entries of one directory, by name; a directory that cannot be read is std::runtime_error.
std::vector<DirEntry> list_directory(const std::string& dir);
// Every entry under dir, depth first, each directory's entries by name; `visit` returns false for a
// directory not to be entered. Subdirectories that cannot be read are skipped.
void walk_directory(const std::string& dir, const std::function<bool(const DirEntry&)>& visit);
// Removes a file, a symbolic link or a whole directory tree; nothing to remove is no error.
// Returns "" or what could not be removed and why.
std::string remove_tree(const std::string& path);
// The same where a failure must stop the caller: std::runtime_error "CONTEXT: cannot remove WHAT (WHY)"
// ("cannot remove ..." with an empty context).
void remove_tree_or_throw(const std::string& path, const std::string& context = "");

// Replaces directory `dst` as a whole: `fill` writes DST.tmp, then DST is renamed to DST.old, DST.tmp to
// DST, and DST.old removed. A process killed at any point leaves DST complete (old or new) or absent
// with DST.old complete; never a half-written DST.
void replace_directory(const std::string& dst, const std::function<void(const std::string& tmp)>& fill);

// An exclusive lock on a path that some process writes (PATH.lock beside it, flock: released by the
// kernel when the process dies, removed on release). A second writer fails at once, naming the path
// and the holder's pid.
class PathLock {
 public:
  explicit PathLock(const std::string& path);
  ~PathLock();
  PathLock(const PathLock&) = delete;
  PathLock& operator=(const PathLock&) = delete;

 private:
  std::string lock_path_;
  int fd_ = -1;
};

// An output directory that a job writes as a whole. The constructor locks OUT, refuses an existing
// non-empty OUT unless `overwrite` (or `replaceable(OUT)` says it holds this job's own earlier
// output), and creates the staging directory OUT.partial (a stale one from a killed run is removed).
// The job writes into path(); commit() puts it in place of OUT as replace_directory does, so no stale
// file of an earlier run survives and nothing half-written is ever at OUT. Destroyed uncommitted (an
// error), the staging directory is removed and OUT is untouched.
class OutputDir {
 public:
  struct Options {
    bool overwrite = false;
    std::function<bool(const std::string& dir)> replaceable;  // optional
    std::string flag = "--overwrite";                           // named in the refusal
  };
  OutputDir(const std::string& out, const Options& options);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  const std::string& path() const { return staging_; }  // write here
  const std::string& final_path() const { return final_; }
  void commit();

 private:
  std::string final_, staging_;
  PathLock lock_;
  bool committed_ = false;
};

// JSON files: a parse error is std::runtime_error "PATH: not valid JSON: ...". With allow_comments,
// // and /* */ comments are skipped (run configs). Writes are atomic, indented, with a final newline.
// Every reader of JSON goes through parse_json: an object with a repeated key is an error
// ("SOURCE: duplicate key 'K'") instead of silently keeping the last value.
nlohmann::json parse_json(const std::string& text, const std::string& source, bool allow_comments = false);
nlohmann::json read_json_file(const std::string& path, bool allow_comments = false);
void write_json_file(const std::string& path, const nlohmann::json& j, int indent = 2);

// An integer JSON value as int64_t; anything else (a float such as 1e20, a string, an unsigned value
// above INT64_MAX) is std::invalid_argument "WHAT must be an integer, got VALUE".
int64_t json_int(const nlohmann::json& v, const std::string& what);

}  // namespace hp
