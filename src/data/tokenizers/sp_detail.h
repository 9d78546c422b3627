// The insides of SentencePieceTokenizer (headprune/data/sentencepiece.h): built from a model file by
// sentencepiece_model.cc, from tokenizer.json by sentencepiece_json.cc, run by sentencepiece.cc.
// Private to src/data/tokenizers.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <unicode/normalizer2.h>

#include "charsmap.h"
#include "headprune/data/sentencepiece.h"

namespace hp {

namespace tokenizer_detail {
// A byte piece's byte ("<0x41>" -> 0x41), or -1 when the text is not of that form.
int byte_of_piece(const std::string& piece);
}  // namespace tokenizer_detail

struct SentencePieceTokenizer::Impl {
  // ---- segmentation: the model's pieces (the id is the index) -----------------------------------
  enum class Algorithm { Unigram, BpeByScore, BpeByRank };
  Algorithm algorithm = Algorithm::Unigram;
  struct Model {
    std::vector<std::string> pieces;
    std::vector<double> scores;
    std::vector<SentencePieceModel::PieceType> types;
    // The pieces segmentation may produce (sentencepiece: normal, user-defined, unused; HF: all),
    // keyed by views into `pieces`.
    std::unordered_map<std::string_view, int64_t> lookup;
    std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> merges;  // (left, right) -> (rank, merged)
    size_t max_piece_bytes = 0;
    // The proper prefixes of the keys of `lookup` (views into `pieces`): Unigram stops extending a
    // candidate once it is none of them, instead of trying every length up to max_piece_bytes.
    std::unordered_set<std::string_view> proper_prefixes;
    void index_prefixes();  // fills proper_prefixes from lookup (sentencepiece.cc)
    double unk_score = 0;  // Unigram: the lowest normal score minus 10 (sentencepiece: in float)
    float user_defined_bonus = 0;  // sentencepiece Unigram: a user-defined piece scores length * this - 0.1
    bool float_scores = false;     // sentencepiece adds path scores in float, HF in double
  };
  std::shared_ptr<const Model> model;
  int64_t model_unk_id = 0;  // the model's unknown piece (-1: none; HF BPE may have none)
  bool byte_fallback = false;
  bool fuse_unk = true;  // consecutive unknown characters are one <unk>
  bool ignore_merges = false;  // HF BPE: a pre-tokenized piece that is a vocabulary entry is one token
  std::array<int64_t, 256> byte_ids{};  // "<0xXX>" pieces, -1 when absent
  std::vector<std::string> user_defined;  // sentencepiece: kept whole, longest first

  // ---- the text pipeline ---------------------------------------------------------------------
  struct Normalizer {
    enum class Kind { SentencePiece, Precompiled, Prepend, Replace, Unicode, Strip, Lowercase } kind;
    explicit Normalizer(Kind k) : kind(k) {}
    std::shared_ptr<const tokenizer_detail::PrecompiledCharsmap> charsmap;  // SentencePiece, Precompiled
    bool add_dummy_prefix = false, remove_extra_whitespaces = false, escape_whitespaces = false;  // SentencePiece
    std::string from, to;                           // Replace (from -> to); Prepend (to)
    const icu::Normalizer2* unicode = nullptr;      // NFC, NFD, NFKC, NFKD
    bool strip_left = false, strip_right = false;   // Strip
  };
  struct PreTokenizer {
    enum class Kind { Metaspace, WhitespaceSplit } kind;
    explicit PreTokenizer(Kind k) : kind(k) {}
    std::string replacement = "\xE2\x96\x81";  // Metaspace
    enum class Prepend { Never, First, Always } prepend = Prepend::Always;
    bool split = true;
  };
  struct Decoder {
    enum class Kind { SentencePiece, Replace, ByteFallback, Fuse, Strip, Metaspace, Trim } kind;  // Trim: whitespace off both ends
    explicit Decoder(Kind k) : kind(k) {}
    std::string from, to;  // Replace; Metaspace: from = replacement; Strip: from = content
    size_t start = 0, stop = 0;  // Strip
    bool drop_first_space = false;  // Metaspace (prepend scheme not Never); SentencePiece (dummy prefix)
  };
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> pre_tokenizers;
  std::vector<Decoder> decoders;
  std::vector<std::pair<std::string, int64_t>> added;  // HF's added tokens, longest first

  // ---- ids as the user sees them -------------------------------------------------------------
  // Marian: a piece's id is its text's in vocab.json (an unknown run too, by its text), else <unk>.
  bool ids_by_text = false;
  int64_t unk_id = 0;  // the unknown id the user sees
  std::vector<std::string> tokens;            // id -> piece ("" where no piece has the id)
  std::unordered_map<std::string, int64_t> ids;
  std::vector<int64_t> specials;              // left out by decode()
  SpecialFrame frame;
  std::string kind;

  // Fills tokens/ids from the model's pieces and the added tokens (ids beyond the model's).
  void index_tokens();
};

}  // namespace hp
