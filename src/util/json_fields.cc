// The JSON field reader (see header).
#include "headprune/util/json_fields.h"

#include <stdexcept>

namespace hp {

JsonFields::JsonFields(const nlohmann::json& object, std::string source, Style style, std::string prefix)
    : j_(object), source_(std::move(source)), style_(std::move(style)), prefix_(std::move(prefix)) {
  if (!j_.is_object()) fail("expected a JSON object, got " + std::string(j_.type_name()));
}

void JsonFields::fail(const std::string& problem) const {
  const std::string what = source_ + ": " + problem;
  if (style_.error == JsonStyle::Error::InvalidArgument) throw std::invalid_argument(what);
  throw std::runtime_error(what);
}

void JsonFields::fail(const std::string& key, const std::string& problem) const {
  fail(style_.label + " '" + prefix_ + key + "' " + problem);
}

bool JsonFields::has(const std::string& key) const {
  const auto it = j_.find(key);
  return it != j_.end() && (style_.nulls == JsonStyle::Nulls::Invalid || !it->is_null());
}

const nlohmann::json& JsonFields::at(const std::string& key) const {
  if (!has(key)) fail(key, style_.missing);
  return j_.at(key);
}

int64_t JsonFields::req_int(const std::string& key) const {
  if (!has(key)) fail(key, style_.missing + " (an integer)");
  return as_int(j_.at(key), key);
}

int64_t JsonFields::as_int(const nlohmann::json& v, const std::string& key) const {
  if (!v.is_number_integer()) fail(key, "must be an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail(key, "is " + v.dump() + ", too large for a 64-bit integer");
  return v.get<int64_t>();
}

int64_t JsonFields::opt_int(const std::string& key, int64_t dflt) const { return has(key) ? req_int(key) : dflt; }

double JsonFields::req_num(const std::string& key) const {
  if (!has(key)) fail(key, style_.missing + " (a number)");
  const auto& v = j_.at(key);
  if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
  return v.get<double>();
}

double JsonFields::opt_num(const std::string& key, double dflt) const { return has(key) ? req_num(key) : dflt; }

bool JsonFields::opt_bool(const std::string& key, bool dflt) const {
  if (!has(key)) return dflt;
  const auto& v = j_.at(key);
  if (!v.is_boolean()) fail(key, "must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string JsonFields::req_str(const std::string& key) const {
  if (!has(key)) fail(key, style_.missing + " (a string)");
  const auto& v = j_.at(key);
  if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
  return v.get<std::string>();
}

std::string JsonFields::opt_str(const std::string& key, const std::string& dflt) const {
  return has(key) ? req_str(key) : dflt;
}

std::vector<std::string> JsonFields::req_strings(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array()) fail(key, "must be a list of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string()) fail(key, "must be a list of strings, got " + s.dump() + " in it");
    out.push_back(s.get<std::string>());
  }
  return out;
}

JsonFields JsonFields::object(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_object()) fail(key, "must be an object, got " + v.dump());
  return JsonFields(v, source_, style_, prefix_ + key + ".");
}

void JsonFields::only(const std::set<std::string>& known, const std::string& noun) const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!known.count(it.key())) fail(it.key(), "is not a known " + noun);
}

}  // namespace hp
