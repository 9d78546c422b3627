// Tasks: turn a data spec (the "data" section of a training config) into tokenized examples
// for a model family, training the subword vocabulary when there is none yet.
//
// Spec keys (paths are relative to data_root unless absolute):
//   kind        "synthetic" | "tsv" | "parallel" | "text"
//   synthetic:  n_train, n_valid, n_test, min_len, max_len (synthetic_data_spec() below)
//   tsv:        train, valid, test (files); text_a, text_b, label (column names); labels (optional:
//               the class names when the label column holds strings, class i = labels[i], e.g.
//               ["entailment", "not_entailment"]; as many as the model's n_classes);
//               valid_fraction instead of valid: that share of the train file's rows (a fixed
//               sample, the same for every run seed) is held out as the valid split, for checkpoint
//               selection, and the vocabulary is trained on the rest; the dev file can then be test
//   parallel:   train, valid, test: [source file, target file]
//   text:       train (file), valid_fraction (that share of the file's lines held out after the
//               training part; default 0.1), test (file, optional) or test_fraction (the file's last
//               lines, after the valid part: a test split of the same text no job trains or selects on)
//   all text kinds: vocab_size, tokenizer ("bpe" | "unigram"), max_len (subword tokens per side;
//               longer examples are truncated (tsv, text blocks) or dropped (parallel, train only)),
//               max_train (0 = all examples)
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/config.h"
#include "headprune/data/dataset.h"
#include "headprune/data/tokenizer.h"

namespace hp {

struct TaskData {
  std::vector<Example> train, valid, test;
  std::optional<Tokenizer> tokenizer;  // absent for synthetic tasks
  // Raw sentences of the splits, for decoding-based metrics (translation: source, reference).
  std::vector<std::pair<std::string, std::string>> valid_text, test_text;
};

// `tokenizer`: use this vocabulary (e.g. a checkpoint's) instead of training one.
// `splits`: which of "train", "valid", "test" to read.
TaskData load_task(const nlohmann::json& spec, const ModelConfig& model, const std::string& data_root,
                   const std::optional<Tokenizer>& tokenizer, const std::vector<std::string>& splits, uint64_t seed);

// Examples from raw text with a given tokenizer, as load_task builds them.
Example classification_example(const Tokenizer& tok, const std::string& a, const std::string& b, int64_t label,
                               int64_t max_len);
// Source side only: x [eos], truncated to max_len.
Example translation_source(const Tokenizer& tok, const std::string& src, int64_t max_len);
Example translation_example(const Tokenizer& tok, const std::string& src, const std::string& tgt, int64_t max_len);
std::vector<Example> lm_blocks(const Tokenizer& tok, const std::vector<std::string>& lines, int64_t block_size);
// `count` blocks of exactly `length` tokens of the file's text (each line framed as the tokenizer frames
// one text - a Llama tokenizer's <s> before it - and followed by eos; consecutive, without overlap), or of
// uniformly random ids below `vocab` (seeded) when `source` is "random". Too
// little text for them is an error naming the file and how many tokens it gave.
std::vector<Example> calibration_blocks(const std::optional<Tokenizer>& tok, const std::string& source, int64_t vocab,
                                        int64_t length, int64_t count, uint64_t seed);

std::string resolve_data_path(const std::string& data_root, const std::string& path);

// The built-in synthetic task's data spec: n_per_split examples in each of train, valid and test
// (training runs use 4000 for train), content lengths 4..20.
nlohmann::json synthetic_data_spec(int64_t n_train = 4000, int64_t n_valid = 500, int64_t n_test = 500);
bool is_synthetic(const nlohmann::json& spec);  // "kind" is "synthetic" (the default)

}  // namespace hp
