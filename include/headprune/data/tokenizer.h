// Subword tokenizer: our own deterministic byte-pair encoding in the style of SentencePiece (words
// split on whitespace, each prefixed with "▁" U+2581), with fixed special ids, trained in memory and
// saved as a small JSON file. Copies share the immutable model and a thread-safe word cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hp {

// The special ids a tokenizer's reference puts around one sequence when asked to add special tokens
// (HF's post-processor: BERT [CLS] … [SEP], Llama <s> …, T5 and Marian … </s>).
struct SpecialFrame {
  std::vector<int64_t> before, after;
};

// Text as every tokenizer reads it, whatever its kind (tokenizer.json BPE, WordPiece and Unigram,
// SentencePiece model files, Marian, GPT-2's files, headprune's own BPE): UTF-8, with each maximal
// ill-formed subsequence replaced by one U+FFFD (Unicode's recommended practice, chapter 3 "U+FFFD
// Substitution of Maximal Subparts"). HF's tokenizers take Rust Strings, so invalid bytes never reach
// them: they are replaced this way before, by Python's bytes.decode("utf-8", errors="replace") or
// Rust's String::from_utf8_lossy, which follow the same rule. Valid text is returned unchanged.
std::string valid_utf8(std::string text);

struct TokenizerTrainOptions {
  int64_t vocab_size = 8000;       // including the 4 special pieces
  std::string kind = "bpe";  // the data spec's "tokenizer": only "bpe" is supported; anything else is std::invalid_argument
  // Keep the most frequent characters covering this fraction of all character occurrences (ties broken
  // by code point); rarer characters become <unk>. "▁" is always kept.
  double character_coverage = 1.0;
  uint64_t seed = 0;          // seeds the sentence sample (max_sentences); training itself has no randomness
  int64_t max_sentences = 0;  // 0 = all; else a seeded random sample of this many (kept in order)
};

class Tokenizer {
 public:
  // Fixed special ids of headprune's own BPE, so models agree: 0 <pad>, 1 <s> (bos / [CLS]),
  // 2 </s> (eos / [SEP]), 3 <unk>.
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;
  // The ids a vocabulary uses to pad, to start a sequence (<s>, BERT's [CLS]), to end one (</s>,
  // [SEP], GPT-2's <|endoftext|>) and for unknown pieces. Data framing reads them from here.
  struct Specials {
    int64_t pad = kPad, bos = kBos, eos = kEos, unk = kUnk;
  };
  // Another tokenizer format behind this interface (HuggingFace's WordPiece and byte-level BPE:
  // hf_tokenizers.h). decode() skips the specials.
  struct Backend {
    virtual ~Backend() = default;
    virtual std::vector<int64_t> encode(const std::string& text) const = 0;
    virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
    virtual int64_t vocab_size() const = 0;
    virtual const std::string& piece(int64_t id) const = 0;
    virtual std::string kind() const = 0;
    virtual SpecialFrame frame() const { return {}; }
  };
  Tokenizer(std::shared_ptr<const Backend> backend, const Specials& specials);

  // Vocabulary: the 4 specials, the kept characters sorted by code point, then one piece per merge in
  // merge order. Training merges the most frequent adjacent pair (ties: smallest (left, right) bytes)
  // until vocab_size pieces exist or no pair occurs twice, so the result may be smaller than asked.
  // The same sentences and options give the same bytes. Bad options, no sentences or a vocab_size
  // below 4 + the number of kept characters are std::invalid_argument.
  static Tokenizer train(const std::vector<std::string>& sentences, const TokenizerTrainOptions& opts);
  // A tokenizer.json file; std::runtime_error naming the path if it is missing or not a valid model.
  static Tokenizer load(const std::string& path);
  // The same from the JSON text (as serialized() returns it); `what` names the source in errors.
  static Tokenizer from_serialized(const std::string& bytes,
                                   const std::string& what = "serialized tokenizer");
  void save(const std::string& path) const;  // atomic: temp file, then rename

  // The text is read by valid_utf8() first, for every kind of tokenizer. Words (split on Unicode
  // whitespace) become "▁word" and are segmented by applying the learned merges lowest rank first;
  // each character outside the vocabulary is one <unk>. No bos/eos added.
  std::vector<int64_t> encode(const std::string& text) const;
  // The same, framed by the special ids the tokenizer's reference adds (frame()); headprune's own BPE
  // adds none.
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens) const;
  SpecialFrame frame() const;
  // Concatenates the pieces, "▁" -> space, drops the leading space: text whose words are separated
  // by single spaces round-trips. Skips the four special ids; an id outside [0, vocab_size) is
  // std::invalid_argument.
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const;
  // The JSON text; a Backend tokenizer has none (it lives in its own files): std::logic_error.
  std::string serialized() const;
  const Specials& specials() const { return specials_; }
  std::string kind() const;  // "headprune-bpe", "wordpiece" or "byte-level-bpe"
  const std::string& piece(int64_t id) const;  // the vocabulary entry; out of range is std::invalid_argument

  struct Model;  // vocabulary, merges and lookup tables (tokenizer.cc)
  struct Cache;  // word -> ids, guarded by a mutex

 private:
  explicit Tokenizer(std::shared_ptr<const Model> model);
  std::shared_ptr<const Model> model_;  // immutable once built: safe to share between copies and threads
  std::shared_ptr<Cache> cache_;
  std::shared_ptr<const Backend> backend_;  // set instead of model_ for other formats
  Specials specials_;
};

}  // namespace hp
