// One reader for the fields of a JSON object: typed, required or optional with a default, and every
// error names the document and the field ("config.json: config field 'hidden_size' must be an
// integer, got \"x\""). Used by the HF config key tables (src/io/hf/family.h) and ModelConfig's field
// table (config.h). Errors are std::runtime_error by default (a file is at fault) or
// std::invalid_argument (a value given by the caller is at fault), as the owner chooses.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hp {

// How a document's fields are read and reported.
struct JsonStyle {
  enum class Nulls { Absent, Invalid };  // whether "key": null reads as absent
  enum class Error { Runtime, InvalidArgument };
  std::string label = "config field";  // the noun in front of a field's name
  std::string missing = "is missing";  // what an absent required field is said to be
  Nulls nulls = Nulls::Absent;
  Error error = Error::Runtime;
};

class JsonFields {
 public:
  using Style = JsonStyle;
  // `source` names the document in errors; `prefix` is put before field names ("rope_scaling.").
  JsonFields(const nlohmann::json& object, std::string source, Style style = {}, std::string prefix = "");

  bool has(const std::string& key) const;  // present (and not null, unless nulls are invalid)
  const nlohmann::json& at(const std::string& key) const;  // must be present

  int64_t req_int(const std::string& key) const;
  // A value inside the field `key` (an element of its list ...) read as an integer.
  int64_t as_int(const nlohmann::json& value, const std::string& key) const;
  int64_t opt_int(const std::string& key, int64_t dflt) const;
  double req_num(const std::string& key) const;
  double opt_num(const std::string& key, double dflt) const;
  bool opt_bool(const std::string& key, bool dflt) const;
  std::string req_str(const std::string& key) const;
  std::string opt_str(const std::string& key, const std::string& dflt) const;
  // A list of strings ("must be a list of strings, got ..." otherwise).
  std::vector<std::string> req_strings(const std::string& key) const;
  // A nested object, read with the same style; its fields are named "key.field".
  JsonFields object(const std::string& key) const;
  // Every key is one of `known` (else "... 'k' is not a known <noun>").
  void only(const std::set<std::string>& known, const std::string& noun = "key") const;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  [[noreturn]] void fail(const std::string& problem) const;  // the document as a whole
  const nlohmann::json& json() const { return j_; }
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& j_;
  std::string source_;
  Style style_;
  std::string prefix_;
};

}  // namespace hp
