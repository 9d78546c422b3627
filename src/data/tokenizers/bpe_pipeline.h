// The normalizer and pre-tokenizer steps of a byte-level BPE read from HF's tokenizer.json: built
// by tokenizer_json.cc, run by ByteLevelBpeTokenizer::pre_tokenize (byte_level_bpe.cc). Private to
// src/data/tokenizers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>

#include "headprune/data/hf_tokenizers.h"
#include "tokenizer_json.h"

namespace hp {

struct ByteLevelBpeTokenizer::Pipeline {
  std::vector<const icu::Normalizer2*> normalizers;  // applied in order
  struct Step {
    std::shared_ptr<const tokenizer_detail::FileRegex> split;  // Split(Regex or String, Isolated): matches and the gaps between them
    bool byte_level = false;                   // ByteLevel: GPT-2's pattern when use_regex
    bool use_regex = false, add_prefix_space = false;
  };
  std::vector<Step> steps;
  std::string path;  // the tokenizer.json, named in errors

  // tokenizer.json's "normalizer" and "pre_tokenizer" (which must hold a ByteLevel step); errors
  // name `path` and the field.
  static std::shared_ptr<const Pipeline> read(const nlohmann::json& tokenizer_json, const std::string& path);
  // The text normalized, then cut into pieces by each step in turn.
  std::vector<std::string> pre_tokenize(const std::string& text) const;

 private:
  // One normalizer or pre-tokenizer of the file (a Sequence: each of its parts), appended.
  void add_normalizer(const nlohmann::json& n, const std::string& field, const std::string& path);
  void add_pre_tokenizer(const nlohmann::json& p, const std::string& field, const std::string& path);
};

}  // namespace hp
