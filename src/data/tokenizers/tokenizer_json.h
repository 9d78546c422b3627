// Readers for the parts of HF's tokenizer.json that several tokenizers share: field errors, the BPE
// vocabulary and merges, the added tokens and the post-processor's special ids. Defined in
// tokenizer_json.cc; private to src/data/tokenizers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

// Standard base64 (with or without padding); an invalid character is an error naming `field`.
std::string base64_decode(const std::string& in, const std::string& path, const std::string& field);

}  // namespace hp::tokenizer_detail
