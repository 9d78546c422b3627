// SentencePiece wrapper (see header). Training reads the sentences through SentencePiece's
// SentenceIterator and returns the model proto bytes, so nothing touches the disk; one thread,
// our own seeded sentence sample and an explicit SentencePiece seed make the result reproducible.
#include "headprune/data/tokenizer.h"

#include <climits>
#include <locale>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "headprune/io/files.h"

namespace hp {
namespace {

namespace spm = sentencepiece;

// Feeds the sentences at `index` (all when empty) to the trainer.
class VectorSentences : public spm::SentenceIterator {
 public:
  VectorSentences(const std::vector<std::string>& sentences, const std::vector<size_t>& index)
      : sentences_(sentences), index_(index) {}
  bool done() const override { return i_ >= (index_.empty() ? sentences_.size() : index_.size()); }
  void Next() override { ++i_; }
  const std::string& value() const override { return sentences_[index_.empty() ? i_ : index_[i_]]; }
  spm::util::Status status() const override { return spm::util::Status(); }

 private:
  const std::vector<std::string>& sentences_;
  const std::vector<size_t>& index_;
  size_t i_ = 0;
};

// k of n indices, uniformly, in increasing order (selection sampling, Knuth's Algorithm S).
// Done here rather than by SentencePiece (input_sentence_size), which refuses k <= 100 and
// samples with a process-wide generator.
std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> out;
  out.reserve(k);
  for (size_t i = 0; i < n && out.size() < k; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), same on every platform
    if (u * static_cast<double>(n - i) < static_cast<double>(k - out.size())) out.push_back(i);
  }
  return out;
}

// Full precision and a '.' whatever the global locale (std::to_string uses "%f").
std::string format_double(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const spm::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}

Tokenizer Tokenizer::train(const std::vector<std::string>& sentences, const TokenizerTrainOptions& opts) {
  auto bad = [](const std::string& msg) { throw std::invalid_argument("tokenizer training: " + msg); };
  if (opts.model_type != "bpe" && opts.model_type != "unigram")
    bad("model_type must be 'bpe' or 'unigram', got '" + opts.model_type + "'");
  if (opts.vocab_size <= 4 || opts.vocab_size > INT_MAX)
    bad("vocab_size must be > 4 (the special pieces) and fit an int, got " + std::to_string(opts.vocab_size));
  if (!(opts.character_coverage > 0 && opts.character_coverage <= 1))
    bad("character_coverage must be in (0, 1], got " + std::to_string(opts.character_coverage));
  if (opts.max_sentences < 0) bad("max_sentences must be >= 0, got " + std::to_string(opts.max_sentences));
  if (sentences.empty()) bad("no sentences");

  const std::unordered_map<std::string, std::string> args = {
      {"model_type", opts.model_type},
      {"vocab_size", std::to_string(opts.vocab_size)},
      {"character_coverage", format_double(opts.character_coverage)},
      {"max_sentence_length", "65536"},  // bytes; longer sentences are skipped (default 4192)
      {"pad_id", std::to_string(kPad)},
      {"bos_id", std::to_string(kBos)},
      {"eos_id", std::to_string(kEos)},
      {"unk_id", std::to_string(kUnk)},
      {"num_threads", "1"},
      {"minloglevel", "2"},  // errors only: training logs a lot on stderr
  };
  std::vector<size_t> index;
  if (opts.max_sentences > 0 && static_cast<size_t>(opts.max_sentences) < sentences.size())
    index = sample_indices(sentences.size(), static_cast<size_t>(opts.max_sentences), opts.seed);
  // SentencePiece's generator is process-wide; seed it anyway in case a code path draws from it
  // (UINT_MAX would mean "leave it as it is").
  spm::SetRandomGeneratorSeed(static_cast<unsigned int>(opts.seed % UINT_MAX));
  VectorSentences it(sentences, index);
  std::string model;
  const auto status = spm::SentencePieceTrainer::Train(args, &it, &model);
  if (!status.ok())
    throw std::runtime_error("tokenizer training: SentencePiece failed: " + std::string(status.message()));
  return from_serialized(model, "trained model");
}

Tokenizer Tokenizer::from_serialized(const std::string& bytes, const std::string& what) {
  auto sp = std::make_shared<spm::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok())
    throw std::runtime_error(what + ": not a SentencePiece model (" + std::string(status.message()) + ")");
  const std::pair<int64_t, const char*> specials[] = {
      {kPad, "<pad>"}, {kBos, "<s>"}, {kEos, "</s>"}, {kUnk, "<unk>"}};
  for (const auto& s : specials) {
    const int id = static_cast<int>(s.first);
    if (id >= sp->GetPieceSize() || sp->IdToPiece(id) != s.second)
      throw std::runtime_error(what + ": expected special piece " + s.second + " at id " + std::to_string(id) +
                               ", got '" + (id < sp->GetPieceSize() ? sp->IdToPiece(id) : "") + "'");
  }
  return Tokenizer(std::move(sp));
}

Tokenizer Tokenizer::load(const std::string& model_path) {
  return from_serialized(read_file(model_path), model_path);
}

void Tokenizer::save(const std::string& model_path) const { write_file_atomic(model_path, serialized()); }

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw std::runtime_error("tokenizer: encode failed: " + std::string(status.message()));
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const int64_t n = vocab_size();
  std::vector<int> keep;
  keep.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= n)
      throw std::invalid_argument("tokenizer: id " + std::to_string(id) + " at position " + std::to_string(i) +
                                  " is outside the vocabulary [0, " + std::to_string(n) + ")");
    if (id > kUnk) keep.push_back(static_cast<int>(id));  // the special ids are 0..3; <unk> too is dropped
  }
  std::string text;
  const auto status = sp_->Decode(keep, &text);
  if (!status.ok()) throw std::runtime_error("tokenizer: decode failed: " + std::string(status.message()));
  return text;
}

int64_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::string Tokenizer::serialized() const { return sp_->serialized_model_proto(); }

}  // namespace hp
