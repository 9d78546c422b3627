// Readers for the parts of HF's tokenizer.json that several tokenizers share: field errors, the BPE
// vocabulary and merges, the added tokens, the post-processor's special ids, and the regexes of the
// file run under ICU's limits. Defined in tokenizer_json.cc; private to src/data/tokenizers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "headprune/data/tokenizer.h"

namespace hp::tokenizer_detail {

// An error of a tokenizer.json field: "PATH: FIELD: WHAT".
std::runtime_error field_error(const std::string& path, const std::string& field, const std::string& what);

// The "model" object (missing: an error saying this is not a tokenizer.json).
const nlohmann::json& model_section(const nlohmann::json& j, const std::string& path);

// model.vocab: {token: id}; an id too large for int64 becomes -1.
std::map<std::string, int64_t> read_vocab(const nlohmann::json& model, const std::string& path);
// model.merges, in rank order: "a b" strings or ["a", "b"] pairs; none when absent.
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& model, const std::string& path);

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
};
// "added_tokens" (none when absent or null). `check_flags`: lstrip, rstrip and single_word set to true
// are errors (a tokenizer that does not implement them says so instead of encoding differently).
std::vector<AddedToken> read_added_tokens(const nlohmann::json& j, const std::string& path, bool check_flags);

// "post_processor": the special ids around one sequence (TemplateProcessing's "single",
// BertProcessing/RobertaProcessing's cls and sep, a Sequence of them; ByteLevel and null add none).
SpecialFrame read_post_processor(const nlohmann::json& j, const std::string& path);

// A pattern from a tokenizer file (a Split's {"Regex": ...}, or a {"String": ...} matched as it is,
// by ICU's UREGEX_LITERAL), run by ICU with a time limit and a backtracking stack limit: a pattern
// that backtracks catastrophically, such as (a+)+$, or any other ICU failure, is a runtime_error
// naming the file, the field and the pattern, never a silently different split.
class FileRegex {
 public:
  // ICU's time limit for one match, in its steps (about 10000 match operations, well under a
  // millisecond each): kTimeLimitBase plus one step per kTimeLimitUnitsPerStep UTF-16 units of the
  // text, so that a legitimate linear-time match over a 10 MB line (Llama 3's \s+ over 10M spaces
  // takes about 1300 steps) passes while (a+)+$ stops within about a second on short texts and a few
  // seconds on a 10 MB line. Counted in steps, not seconds: the same text gives the same answer on
  // any machine, busy or not.
  static constexpr int32_t kTimeLimitBase = 1000, kTimeLimitUnitsPerStep = 2000;
  static constexpr int32_t kStackLimitBytes = 16 << 20;  // ICU's backtracking stack (its default is 8 MB)
  static int32_t time_limit(int32_t text_length);

  // `pattern` as the file writes it (a regex in HF's dialect: \s and \S are Unicode White_Space);
  // `field` names it in errors ("pre_tokenizer.pretokenizers[0].pattern"). A pattern ICU cannot
  // compile is an error.
  FileRegex(const std::string& pattern, bool literal, const std::string& path, const std::string& field);
  // Calls on_match(start, end) (UTF-16 offsets) for each non-empty match of `text`, left to right, as
  // ICU's find() does (after an empty match the search goes on one code point later).
  void for_each_match(const icu::UnicodeString& text, const std::function<void(int32_t, int32_t)>& on_match) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::runtime_error error(const std::string& what) const;
  std::string pattern_;
  bool literal_;
  std::string path_, field_;
  std::unique_ptr<icu::RegexPattern> re_;  // immutable once compiled: matchers on several threads may share it
};

// Standard base64 (with or without padding); an invalid character is an error naming `field`.
std::string base64_decode(const std::string& in, const std::string& path, const std::string& field);

}  // namespace hp::tokenizer_detail
