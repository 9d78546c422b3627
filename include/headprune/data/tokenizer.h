// Subword tokenizer: a thin, copyable wrapper over SentencePiece (BPE or unigram) with fixed
// special ids, trained in memory and deterministically, saved as a standard .model file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace hp {

struct TokenizerTrainOptions {
  int64_t vocab_size = 8000;       // including the 4 special pieces
  std::string model_type = "bpe";  // or "unigram"
  double character_coverage = 1.0;
  uint64_t seed = 0;          // seeds the sentence sample (max_sentences) and SentencePiece's generator
  int64_t max_sentences = 0;  // 0 = all; else a seeded random sample of this many (kept in order)
};

class Tokenizer {
 public:
  // Fixed special ids so models agree: 0 <pad>, 1 <s> (bos / [CLS]), 2 </s> (eos / [SEP]), 3 <unk>.
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;

  // Trains in memory (no files) on one thread with a fixed seed: the same sentences and options
  // give the same model bytes. Bad options are std::invalid_argument; a SentencePiece failure
  // (e.g. a vocab_size larger than the data allows) is std::runtime_error with its message.
  static Tokenizer train(const std::vector<std::string>& sentences, const TokenizerTrainOptions& opts);
  // A SentencePiece .model file; std::runtime_error naming the path if it is missing or not a model.
  static Tokenizer load(const std::string& model_path);
  // The same from the model bytes (as serialized() returns them); `what` names the source in errors.
  static Tokenizer from_serialized(const std::string& bytes, const std::string& what = "serialized model");
  void save(const std::string& model_path) const;  // atomic: temp file, then rename

  std::vector<int64_t> encode(const std::string& text) const;  // no bos/eos added
  // Skips the four special ids; an id outside [0, vocab_size) is std::invalid_argument.
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const;
  std::string serialized() const;  // the model proto bytes

 private:
  explicit Tokenizer(std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp);
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;  // immutable once loaded: safe to share
};

}  // namespace hp
