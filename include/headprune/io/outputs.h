// The output policy: what a command may write, replace and remove (docs/reliability.md, "What a
// command writes"). Every writer of the library goes through this header:
//
// 1. A command writes only paths it created or that carry its own marker. An output directory holds
//    `.headprune-output` naming its kind ("prune", "gates", "train", ...); a result file carries its
//    format tag (io/formats.h) or its kind's marker (the HTML report's generator, a trace's format).
// 2. Scratch and backup names are unique to the run: `.NAME.headprune-partial.PID.RANDOM` beside NAME
//    (made with mkdir / O_EXCL, so never a name that exists). A later run removes a killed run's scratch
//    only when its process is gone and (a directory) it holds the marker.
// 3. An existing output is replaced only when it is a headprune output of the same kind — a directory
//    only with --overwrite (the demo replaces its own), a result file of the same kind without it —
//    never a user's directory or file, a file of another kind, a device, a FIFO, a socket, a symbolic
//    link (or what it points to), `/`, the home directory, the working directory or one above it.
// 4. An output equal to, inside or holding a path the command reads (or another of its outputs) is
//    refused before any work starts.
// 5. Every write is checked (stream state after flush and close, fsync, rename) and a failure names
//    the path; nothing half-written is ever at an output's name, and the command exits non-zero.
//
// In a run of several processes only rank 0 writes (io/files.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headprune/io/files.h"

namespace hp {

constexpr const char* kOutputMarker = ".headprune-output";

// A path a command reads or writes, with how the user named it ("--out", "the checkpoint").
struct NamedPath {
  std::string path;
  std::string what;
};

// The absolute form of a path with every existing component's symbolic links resolved and `.`/`..`
// removed (the part that does not exist yet is normalized as written).
std::string resolved_path(const std::string& path);
// a == b, or a lies inside b (both resolved).
bool path_within(const std::string& a, const std::string& b);

// Refuses (std::invalid_argument, naming both) an output that is `/`, the home directory, the working
// directory or a directory above it; equal to, inside or holding an input; or equal to, inside or
// holding another output. Empty paths are skipped.
void check_outputs_apart(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// The kind a directory's marker names, or nullopt (no marker, not a directory, unreadable marker).
std::optional<std::string> output_kind(const std::string& dir);
// Writes the marker of `kind` into dir (which the caller has just created), on this process alone (in a
// run of several processes, rank 0 inside its own section: not a collective).
void write_output_marker(const std::string& dir, const std::string& kind);

// What lies at a path, for the policy's refusals: "" when nothing, else "a directory", "a regular
// file", "a symbolic link", "a FIFO", "a device", "a socket".
std::string path_type(const std::string& path);

// Replaces directory `dst` as a whole: `fill` writes a fresh scratch directory beside it, then DST is
// renamed to a backup name, the scratch to DST, and the backup removed. A process killed at any point
// leaves DST complete (old or new) or absent with the backup complete; never a half-written DST. For
// directories the caller owns (a checkpoint inside its own output, the trainer's best/ and last/).
void replace_directory(const std::string& dst, const std::function<void(const std::string& tmp)>& fill);

// An exclusive lock on a path that some process writes (DIR/.NAME.headprune-lock beside it, flock:
// released by the kernel when the process dies, removed on release). A second writer fails at once,
// naming the path and the holder's pid. A lock file that is not a regular file holding a pid is a
// user's, and refused.
class PathLock {
 public:
  explicit PathLock(const std::string& path);
  ~PathLock();
  PathLock(const PathLock&) = delete;
  PathLock& operator=(const PathLock&) = delete;
  static std::string lock_path(const std::string& path);

 private:
  std::string lock_path_;
  int fd_ = -1;
};

// An output directory that a job writes as a whole. The constructor checks the policy before any
// work (refusing with the path named and the way out), locks OUT, and creates a scratch staging
// directory with the marker in it. The job writes into path(); commit() puts it in place of OUT, so
// no stale file of an earlier run survives and nothing half-written is ever at OUT. Destroyed
// uncommitted (an error), the staging directory is removed and OUT is untouched.
class OutputDir {
 public:
  struct Options {
    Options(std::string kind_ = "", bool overwrite_ = false, bool replace_own_ = false,
            std::vector<NamedPath> inputs_ = {}, std::string what_ = "--out", std::string flag_ = "--overwrite")
        : kind(std::move(kind_)), overwrite(overwrite_), replace_own(replace_own_), inputs(std::move(inputs_)),
          what(std::move(what_)), flag(std::move(flag_)) {}
    std::string kind;               // the marker's kind: "prune", "export-hf", ...
    bool overwrite = false;         // replace an earlier output of the same kind
    bool replace_own = false;       // ... even without overwrite (the demo's own directory)
    std::vector<NamedPath> inputs;  // what the job reads (refused when OUT is, holds or lies inside one)
    std::string what = "--out";     // how the user named OUT
    std::string flag = "--overwrite";
  };
  OutputDir(const std::string& out, const Options& options);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  const std::string& path() const { return staging_; }  // write here
  const std::string& final_path() const { return final_; }
  void commit();

 private:
  void check_target() const;  // the policy's refusals for OUT as it is now
  std::string final_, staging_;
  Options options_;
  std::optional<PathLock> lock_;
  std::unique_ptr<StagedAs> staged_as_;  // errors inside staging_ name final_
  bool committed_ = false;
};

// A directory of this run's own for intermediate files: DIR/headprune-TAG-XXXXXX made by mkdtemp (DIR:
// `parent`, or $TMPDIR or /tmp), with the marker, removed with everything in it when destroyed.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag, const std::string& parent = "");
  // DIR/.NAME.headprune-TAG.PID.RANDOM beside `path` (with the marker), after removing what killed runs
  // left there (remove_stale_scratch): for intermediate files of an output that a SIGKILL must not
  // strand in the temp directory.
  static ScratchDir beside(const std::string& path, const std::string& tag);
  ~ScratchDir();
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)), owner_(other.owner_) { other.owner_ = false; }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  ScratchDir() = default;
  std::string path_;
  bool owner_ = false;
};

// A single-file output (bench --json, eval --hyps, report --out, ...).
struct OutputFile {
  std::string path;
  std::string what;  // the option that named it: "--json"
  std::string kind;  // what it holds, for messages: "a bench result (JSON)"
  // Whether an existing regular file is an earlier output of this kind (then it is replaced). Unset:
  // the format has no marker (plain text), and an existing file is replaced only with `overwrite`.
  std::function<bool(const std::string& path)> ours;
  bool overwrite = false;
  std::string flag = "--overwrite";
};

// The policy's refusals for a file output, before any work: a symbolic link, a directory, a device,
// FIFO or socket, a regular file that is not an earlier output of the kind, a path `inputs` holds.
void check_output_file(const OutputFile& f, const std::vector<NamedPath>& inputs = {});
// Checks again and writes `content` atomically (scratch file, flush, close, fsync, rename).
void write_output_file(const OutputFile& f, const std::string& content);

// Recognisers for OutputFile::ours: a JSON file whose "format" tag starts with `tag_prefix`
// ("headprune-bench/"); a file whose first 4 KiB contain `needle`.
std::function<bool(const std::string&)> json_format_is(const std::string& tag_prefix);
std::function<bool(const std::string&)> file_head_contains(const std::string& needle);

}  // namespace hp
