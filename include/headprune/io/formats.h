// The result files headprune writes and reads back (by `plot`, `report`, `agreement`, `roles
// --importance`): each JSON object carries "format": "headprune-<kind>/<version>", written here once.
// A reader names the kind it expects; a file of another kind or of a newer version is refused with
// its name. Files written before formats existed (no "format" field) are recognised by the keys
// their kind always had.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json_fwd.hpp>

namespace hp {

enum class ResultKind {
  Importance,  // importance.json: {"maps": [...]} (score/head_scores.h)
  Curve,       // curve.json: {"points": [...]} (jobs/prune_job.h)
  Gates,       // gates.json: {"heads", "log", "options", ...} (jobs/gates_job.h)
  Roles,       // roles.json: {"heads", "shares", "thresholds", ...} (jobs/roles_job.h)
  Bench,       // bench --json: {"records", "environment"} (eval/benchmark.h)
  Summary,     // prune's summary.json: {"plan", "stages", ...} (jobs/prune_job.h)
  History,     // train's history.json: an array of evaluations (no format field: it is an array)
};

// Tags of the files headprune writes that are not results to plot: the output policy (io/outputs.h)
// recognises them as headprune's own when a later run writes the same path.
constexpr const char* kTraceFormat = "headprune-trace/1";      // bench --profile: {"format", "traceEvents"}
constexpr const char* kBenchIoFormat = "headprune-bench-io/1";  // bench --save-io: safetensors __metadata__.format
constexpr const char* kPlanFormat = "headprune-plan/1";         // a pruning plan (prune/plan.h): plan.json, --plan

struct ResultFormat {
  ResultKind kind;
  const char* name;  // "importance": the tag is headprune-importance/VERSION
  int version;       // the newest version this build writes and reads
  std::vector<const char*> keys;  // what every file of the kind has (recognises files without a tag)
};

const std::vector<ResultFormat>& result_formats();
const ResultFormat& result_format(ResultKind kind);
std::string to_string(ResultKind kind);
std::string format_tag(ResultKind kind);                // "headprune-importance/1"
void stamp_format(nlohmann::json& j, ResultKind kind);  // j["format"] = format_tag(kind)

// The kind of a parsed result: from its "format" (an unknown or too new tag throws, naming `source`),
// else from its keys; nullopt when it is not a headprune result.
std::optional<ResultKind> result_kind(const nlohmann::json& j, const std::string& source);

// Checks that `j` (read from `source`) is a result of `kind`; throws std::invalid_argument
// "SOURCE: expected a headprune importance result (format headprune-importance/1), got ...".
void check_result(const nlohmann::json& j, ResultKind kind, const std::string& source);

// Reads a result: SOURCE is a path, or PATH#/json/pointer for a result kept inside a larger JSON file
// (a study's collected results). Errors name SOURCE.
nlohmann::json read_result(const std::string& source, ResultKind kind);
// Any result, whatever its kind (returned with it).
std::pair<nlohmann::json, ResultKind> read_any_result(const std::string& source);

}  // namespace hp
