// Tokenizers of HuggingFace checkpoints, so imported BERT and GPT-2 models run on text:
//   WordPieceTokenizer   BERT: vocab.txt; basic tokenization (text cleaning, CJK characters split
//                        out, lower-casing and accent stripping per do_lower_case, punctuation split)
//                        then greedy longest-match-first word pieces with "##" continuations.
//   ByteLevelBpeTokenizer  GPT-2: vocab.json + merges.txt; GPT-2's pre-tokenization pattern
//                        ('s 't 're 've 'm 'll 'd | ?letters | ?numbers | ?other | spaces), bytes
//                        mapped to printable characters, then BPE by merge rank (lowest rank
//                        first, ties to the leftmost pair, over a linked list of symbols with a
//                        priority queue of their adjacent pairs: O(n log n) in a word's length).
//                        Or HF's tokenizer.json of a byte-level BPE model (Llama 3, Qwen2, SmolLM,
//                        GPT-2): normalizer (none, NFC, NFKC, a Sequence of them), pre-tokenizer
//                        (ByteLevel with or without GPT-2's pattern, Split by a regex with behavior
//                        Isolated, or a Sequence; regexes run on ICU), BPE with ignore_merges, and
//                        added tokens, matched before anything else (longest first).
// Unicode properties (categories, case mapping, NFC/NFD) come from ICU. Plain C++ (no LibTorch).
// Text is UTF-8; invalid bytes are read by valid_utf8() (tokenizer.h): one U+FFFD per maximal
// ill-formed subsequence, as for every kind of tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "headprune/data/sentencepiece.h"
#include "headprune/data/tokenizer.h"

namespace hp {

class WordPieceTokenizer {
 public:
  struct Options {
    bool do_lower_case = true;
    std::optional<bool> strip_accents;  // unset: follow do_lower_case (as HF does)
    bool tokenize_chinese_chars = true;
    std::string unk_token = "[UNK]";
    int64_t max_chars_per_word = 100;
  };
  // One token a line; the line number (from 0) is the id. Errors name the file (missing, empty,
  // duplicate entries with their line numbers, no unk token).
  static WordPieceTokenizer load(const std::string& vocab_txt, const Options& opts);
  static WordPieceTokenizer from_vocab(const std::vector<std::string>& vocab, const Options& opts,
                                       const std::string& what = "vocabulary");

  std::vector<std::string> basic_tokenize(const std::string& text) const;  // words and punctuation
  std::vector<std::string> tokenize(const std::string& text) const;        // word pieces
  std::vector<int64_t> encode(const std::string& text) const;              // ids, no [CLS]/[SEP]
  // Tokens joined by spaces, "##" continuations glued to the token before.
  std::string decode(const std::vector<int64_t>& ids) const;
  std::optional<int64_t> id(const std::string& token) const;
  const std::string& token(int64_t id) const;  // out of range is std::invalid_argument
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  std::vector<std::string> wordpiece(const std::string& word) const;
  Options opts_;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int64_t> ids_;
};

class ByteLevelBpeTokenizer {
 public:
  // vocab.json: {"token": id, ...}; merges.txt: an optional "#version" line, then "a b" per line in
  // rank order. Errors name the file and line.
  static ByteLevelBpeTokenizer load(const std::string& vocab_json, const std::string& merges_txt);
  static ByteLevelBpeTokenizer from_parts(const std::map<std::string, int64_t>& vocab,
                                          const std::vector<std::pair<std::string, std::string>>& merges);
  // HF's tokenizer.json; a component it does not handle is an error naming the file and the field.
  static ByteLevelBpeTokenizer from_tokenizer_json(const std::string& path);
  // The same from the file's parsed JSON (`path` names it in errors).
  static ByteLevelBpeTokenizer from_tokenizer_json(const nlohmann::json& file, const std::string& path);
  // Added tokens (content -> id) of tokenizer.json, matched in text before pre-tokenization.
  const std::map<std::string, int64_t>& added_tokens() const { return added_; }
  // The post-processor's special ids (tokenizer.json; GPT-2's files add none).
  const SpecialFrame& frame() const { return frame_; }

  std::vector<std::string> pre_tokenize(const std::string& text) const;  // raw UTF-8 pieces
  std::vector<std::string> tokenize(const std::string& text) const;      // byte-level BPE tokens
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;  // an unknown id is std::invalid_argument
  std::optional<int64_t> id(const std::string& token) const;
  const std::string& token(int64_t id) const;  // an unknown id is std::invalid_argument
  // One past the largest id (ids need not be contiguous).
  int64_t vocab_size() const { return by_id_.empty() ? 0 : by_id_.rbegin()->first + 1; }

  // GPT-2's reversible map from the 256 byte values to printable code points, as UTF-8.
  static const std::vector<std::string>& byte_symbols();

 private:
  std::vector<std::string> bpe(const std::string& piece) const;
  std::vector<std::string> tokenize_plain(const std::string& text) const;  // text without added tokens
  std::unordered_map<std::string, int64_t> ids_;
  std::map<int64_t, std::string> by_id_;
  // The merges by number: every string a merge names (its parts and its result) gets one;
  // (left << 32 | right) -> (rank, the result's number). bpe() runs on these numbers.
  std::unordered_map<std::string, int32_t> merge_symbols_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::array<int32_t, 256> byte_merge_symbols_{};  // each byte's symbol's number (-1: in no merge)
  // tokenizer.json only (defaults: GPT-2's files).
  struct Pipeline;                          // normalizer and pre-tokenizer steps (ICU regexes): src/data/tokenizers/
  std::shared_ptr<const Pipeline> pipeline_;  // null: GPT-2's pattern
  bool ignore_merges_ = false;              // a piece that is a vocabulary entry is one token
  std::map<std::string, int64_t> added_;    // content -> id
  SpecialFrame frame_;
};

// ---- behind headprune's Tokenizer interface, so data framing and decoding work unchanged ------

// Files of an HF tokenizer in a checkpoint directory; commands copy them along with a model.
const std::vector<std::string>& hf_tokenizer_files();  // vocab.txt, vocab.json, merges.txt, ...

// Specials from tokenizer_config.json's cls/sep/pad/unk tokens (defaults [CLS], [SEP], [PAD], [UNK]);
// an absent token is std::invalid_argument naming it.
Tokenizer as_tokenizer(WordPieceTokenizer wp, const std::map<std::string, std::string>& special_tokens = {});
// GPT-2: bos = eos = pad = unk = "<|endoftext|>" (or tokenizer_config.json's bos/eos/unk tokens).
Tokenizer as_tokenizer(ByteLevelBpeTokenizer bpe, const std::map<std::string, std::string>& special_tokens = {});
// SentencePiece-style (sentencepiece.h): unk "<unk>", eos "</s>", pad "<pad>" (else eos), bos "<s>"
// (else pad: T5 and Marian decoders start from it), or tokenizer_config.json's tokens.
Tokenizer as_tokenizer(SentencePieceTokenizer spt, const std::map<std::string, std::string>& special_tokens = {});

// The tokenizer of an HF directory, the first of: vocab.txt (BERT WordPiece; do_lower_case,
// strip_accents, tokenize_chinese_chars and the special tokens from tokenizer_config.json when
// present), source.spm + vocab.json (Marian), vocab.json + merges.txt (GPT-2), tokenizer.json (a
// byte-level BPE: Llama 3, Qwen2; or SentencePiece-style, sentencepiece.h: Llama-2, Mistral, T5;
// specials from tokenizer_config.json, else the usual names among its added tokens), tokenizer.model
// (sentencepiece; <s> added before a text unless add_bos_token is false). std::nullopt when the
// directory has none of them; errors name the file.
std::optional<Tokenizer> load_hf_tokenizer(const std::string& dir);

}  // namespace hp
