// File helpers: whole-file reads with clear errors, and atomic writes (a scratch file of this run in
// the same directory, flushed, closed, synced, then renamed over the target) so no reader ever sees
// half a file. What a command may write at all is the output policy of io/outputs.h.
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


// Throws std::runtime_error naming the path; a file larger than max_bytes is refused before it is read,
// and anything without a size (a device such as /dev/zero, a pipe) as soon as it has given more.
std::string read_file(const std::string& path, uint64_t max_bytes = kMaxTextFileBytes);
// The same bounded read, handed to `sink` piece by piece (for readers that stop earlier, e.g. on a line
// longer than they take).
void read_chunks(const std::string& path, const std::function<void(const char*, size_t)>& sink,
                 uint64_t max_bytes = kMaxTextFileBytes);
// At most the first max_bytes of a regular file (never follows a symbolic link); "" when it cannot be read.
std::string read_file_head(const std::string& path, size_t max_bytes);
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_file_atomic(const std::string& path, const std::string& content);
// The same on this process alone, never a collective (util/dist.h): for what rank 0 writes inside a
// section only it runs (an output directory's marker), where the others do not wait for the write.
void write_file_atomic_local(const std::string& path, const std::string& content);
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

// A fresh name beside `path` for this run's scratch: DIR/.NAME.headprune-TAG.PID.RANDOM (not created;
// the callers create it with mkdir or O_EXCL, so an existing entry is never taken over).
std::string scratch_name(const std::string& path, const std::string& tag);
// Removes DIR/.NAME.headprune-TAG.PID.RANDOM entries left beside `path` by killed runs: only when that
// process is gone, and a directory only when it holds `marker` (io/outputs.h). Housekeeping: errors
// are ignored. Rank 0 only.
void remove_stale_scratch(const std::string& path, const std::string& marker);

// While alive, the errors of write_file_atomic for a path inside `staging` name it as the same path
// inside `final` (what the user asked for), with the staging directory in parentheses.
class StagedAs {
 public:
  StagedAs(std::string staging, std::string final);
  ~StagedAs();
  StagedAs(const StagedAs&) = delete;
  StagedAs& operator=(const StagedAs&) = delete;

 private:
  std::string staging_;
};
// The name under which an error reports `path` (see StagedAs).
std::string display_path(const std::string& path);

// Several processes (util/dist.h): `write` runs on rank 0 only and the others wait until it has.
// write_file_atomic and the output directories of io/outputs.h are such writes.
void collective_write(const std::function<void()>& write);

// JSON files: a parse error is std::runtime_error "PATH: not valid JSON: ...". With allow_comments,
// // and /* */ comments are skipped (run configs). Writes are atomic, indented, with a final newline.
// Every reader of JSON goes through parse_json: an object with a repeated key is an error
// ("SOURCE: duplicate key 'K'") instead of silently keeping the last value.
// Objects and arrays nested deeper than kMaxJsonDepth are an error naming `source`, found while
// parsing (nothing deep is ever built, copied or compared).
constexpr int kMaxJsonDepth = 256;
nlohmann::json parse_json(const std::string& text, const std::string& source, bool allow_comments = false);
nlohmann::json read_json_file(const std::string& path, bool allow_comments = false);
void write_json_file(const std::string& path, const nlohmann::json& j, int indent = 2);

// For error messages and path checks: strerror(errno); a path without its trailing slashes ("/" stays).
std::string errno_text();
std::string without_trailing_slashes(std::string p);


}  // namespace hp
