// The result formats' table (kind, name, version, the keys each kind always has), the "format" tag
// written into every result file, and the readers that tell a file's kind, refusing another kind or a
// newer version with the file's name; see the header.
#include "headprune/io/formats.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/io/files.h"

namespace hp {

const std::vector<ResultFormat>& result_formats() {
  static const std::vector<ResultFormat> formats = {
      {ResultKind::Importance, "importance", 1, {"maps"}},
      {ResultKind::Curve, "curve", 1, {"points"}},
      {ResultKind::Gates, "gates", 1, {"heads", "log", "options"}},
      {ResultKind::Roles, "roles", 1, {"heads", "shares", "thresholds"}},
      {ResultKind::Bench, "bench", 1, {"records", "environment"}},
      {ResultKind::Summary, "summary", 1, {"plan", "stages"}},
      {ResultKind::History, "history", 1, {}},
  };
  return formats;
}

const ResultFormat& result_format(ResultKind kind) {
  for (const auto& f : result_formats())
    if (f.kind == kind) return f;
  throw std::logic_error("result_format: unknown kind");
}

std::string to_string(ResultKind kind) { return result_format(kind).name; }

std::string format_tag(ResultKind kind) {
  const auto& f = result_format(kind);
  return std::string("headprune-") + f.name + "/" + std::to_string(f.version);
}

void stamp_format(nlohmann::json& j, ResultKind kind) { j["format"] = format_tag(kind); }

namespace {

bool has_keys(const nlohmann::json& j, const ResultFormat& f) {
  if (f.keys.empty()) return false;
  for (const char* k : f.keys)
    if (!j.contains(k)) return false;
  return true;
}

// A training history: a non-empty array of objects that each have a step.
bool is_history(const nlohmann::json& j) {
  if (!j.is_array() || j.empty()) return false;
  for (const auto& e : j)
    if (!e.is_object() || !e.contains("step")) return false;
  return true;
}

std::string describe(const nlohmann::json& j) {
  if (j.is_object() && j.contains("format"))
    return "format " + (j["format"].is_string() ? j["format"].get<std::string>() : j["format"].dump());
  if (j.is_object()) {
    std::string keys;
    int n = 0;
    for (auto it = j.begin(); it != j.end() && n < 6; ++it, ++n) keys += (n ? ", " : "") + it.key();
    return "an object with keys " + (keys.empty() ? std::string("(none)") : keys) + (j.size() > 6 ? ", ..." : "");
  }
  return std::string("a JSON ") + j.type_name();
}

}  // namespace

std::optional<ResultKind> result_kind(const nlohmann::json& j, const std::string& source) {
  if (is_history(j)) return ResultKind::History;
  if (!j.is_object()) return std::nullopt;
  if (j.contains("format")) {
    const auto& v = j["format"];
    const std::string tag = v.is_string() ? v.get<std::string>() : v.dump();
    const std::string prefix = "headprune-";
    const auto slash = tag.rfind('/');
    // Another file (a checkpoint's config.json says "headprune", a plan "headprune-plan/1"): not a result.
    if (tag.rfind(prefix, 0) != 0 || slash == std::string::npos) return std::nullopt;
    const std::string name = tag.substr(prefix.size(), slash - prefix.size());
    int version = 0;
    try {
      size_t used = 0;
      version = std::stoi(tag.substr(slash + 1), &used);
      if (used != tag.size() - slash - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw std::invalid_argument(source + ": 'format' is '" + tag + "': the version after '/' must be an integer");
    }
    for (const auto& f : result_formats()) {
      if (name != f.name) continue;
      if (version < 1 || version > f.version)
        throw std::invalid_argument(source + ": format " + tag + " is not readable by this headprune (it reads " +
                                    format_tag(f.kind) + " and older; a newer headprune wrote this file?)");
      return f.kind;
    }
    return std::nullopt;  // another headprune file (a plan, a checkpoint config): not a result
  }
  for (const auto& f : result_formats())
    if (has_keys(j, f)) return f.kind;
  return std::nullopt;
}

void check_result(const nlohmann::json& j, ResultKind kind, const std::string& source) {
  const auto got = result_kind(j, source);
  if (got == kind) return;
  const auto& f = result_format(kind);
  std::string expected = "expected a headprune " + std::string(f.name) + " result (format " + format_tag(kind);
  if (!f.keys.empty()) {
    expected += ", or an older file with the keys";
    for (const char* k : f.keys) expected += std::string(" '") + k + "'";
  }
  expected += ")";
  throw std::invalid_argument(source + ": " + expected + ", got " +
                              (got ? "a " + to_string(*got) + " result" : describe(j)));
}

namespace {

nlohmann::json load_source(const std::string& source) {
  const auto hash = source.find('#');
  const std::string path = source.substr(0, hash);
  nlohmann::json j = read_json_file(path);
  if (hash == std::string::npos) return j;
  const std::string pointer = source.substr(hash + 1);
  try {
    const nlohmann::json::json_pointer p(pointer);
    if (!j.contains(p)) throw std::invalid_argument("nothing at " + pointer);
    return j.at(p);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(source + ": '" + pointer + "' is not a JSON pointer into " + path + " (" + e.what() + ")");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what() + " in " + path);
  }
}

}  // namespace

nlohmann::json read_result(const std::string& source, ResultKind kind) {
  nlohmann::json j = load_source(source);
  check_result(j, kind, source);
  return j;
}

std::pair<nlohmann::json, ResultKind> read_any_result(const std::string& source) {
  nlohmann::json j = load_source(source);
  const auto kind = result_kind(j, source);
  if (!kind) {
    std::string kinds;
    for (const auto& f : result_formats()) kinds += (kinds.empty() ? "" : ", ") + std::string(f.name);
    throw std::invalid_argument(source + ": not a headprune result (" + kinds + "), got " + describe(j));
  }
  return {std::move(j), *kind};
}

}  // namespace hp
