// SentencePiece-family tokenizers (Llama-2, Mistral, T5, Marian), read without libsentencepiece (its
// bundled protobuf clashes with LibTorch's):
//   SentencePieceModel      a `tokenizer.model` / `*.spm` file: sentencepiece's ModelProto read by
//                           headprune's own wire-format reader (util/protowire.h).
//   SentencePieceTokenizer  encodes and decodes as the reference implementations do:
//     - from a model file, as sentencepiece itself: the normalizer (precompiled charsmap, extra
//       whitespace removal, dummy prefix, spaces as "▁"), then BPE by piece score or Unigram by
//       Viterbi, user-defined pieces kept whole, unknown characters as UTF-8 byte pieces when the
//       model has byte fallback (else one <unk> per run of them);
//     - from HF's tokenizer.json (BPE with byte_fallback, or Unigram), as HF's `tokenizers` does:
//       added tokens matched in the raw text first, then the normalizer (Precompiled, Prepend,
//       Replace, NFC/NFD/NFKC/NFKD, Strip, Lowercase, Sequence), the pre-tokenizer (Metaspace,
//       WhitespaceSplit, Sequence), BPE by merge rank or Unigram, the post-processor's special ids
//       and the decoder (Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence);
//     - Marian (opus-mt): source.spm's pieces mapped to ids through vocab.json, as HF's
//       MarianTokenizer does (a piece missing there is <unk>), </s> appended.
// Errors name the file and the field. Plain C++ (no LibTorch); Unicode from ICU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headprune/data/tokenizer.h"

namespace hp {

// The parts of sentencepiece's ModelProto that encoding and decoding use (sentencepiece_model.proto:
// ModelProto.pieces = 1, trainer_spec = 2, normalizer_spec = 3).
struct SentencePieceModel {
  enum class Algorithm { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };
  enum class PieceType { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
  struct Piece {
    std::string text;
    float score = 0;
    PieceType type = PieceType::Normal;
  };
  std::vector<Piece> pieces;  // the id is the index
  Algorithm algorithm = Algorithm::Unigram;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // -1: none
  struct Normalizer {
    std::string name;                  // "nmt_nfkc", "identity", ...
    std::string precompiled_charsmap;  // empty: characters are kept as they are
    bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  } normalizer;

  // Parses and checks a serialized ModelProto: pieces present and distinct, exactly one <unk>, byte
  // pieces "<0xXX>" only with byte_fallback (then all 256), a readable charsmap, Unigram or BPE.
  // std::runtime_error "WHAT: FIELD: PROBLEM".
  static SentencePieceModel parse(std::string_view bytes, const std::string& what);
  static SentencePieceModel load(const std::string& path);
};

class SentencePieceTokenizer {
 public:
  static SentencePieceTokenizer load(const std::string& model_path);  // tokenizer.model, *.spm
  static SentencePieceTokenizer from_model(const SentencePieceModel& model, const std::string& what);
  // HF's tokenizer.json of a BPE with byte_fallback or a Unigram model; another kind is an error
  // naming the file and the field.
  static SentencePieceTokenizer from_tokenizer_json(const std::string& path);
  // The same from the file's parsed JSON (`path` names it in errors).
  static SentencePieceTokenizer from_tokenizer_json(const nlohmann::json& file, const std::string& path);
  // Marian: the same pieces, their ids read from vocab.json ({piece: id}); the unknown id is
  // vocab.json's "<unk>", and encode(…, with specials) appends its "</s>".
  SentencePieceTokenizer with_vocabulary(const std::string& vocab_json) const;

  std::vector<std::string> tokenize(const std::string& text) const;  // the pieces
  std::vector<int64_t> encode(const std::string& text) const;        // no special ids added
  // The special ids the reference puts around one sequence (HF's post-processor; Llama-style model
  // files: <s> before, as LlamaTokenizer's add_bos_token; Marian: </s> after).
  const SpecialFrame& frame() const;
  void set_frame(SpecialFrame frame);
  // Pieces back to text: byte pieces joined into UTF-8, "▁" as a space, the dummy prefix dropped;
  // special and control ids are left out. An unknown id is std::invalid_argument.
  std::string decode(const std::vector<int64_t>& ids) const;

  std::optional<int64_t> id(const std::string& piece) const;
  const std::string& token(int64_t id) const;  // an unknown id is std::invalid_argument
  int64_t vocab_size() const;                  // one past the largest id
  std::string kind() const;                    // "sentencepiece-bpe" or "sentencepiece-unigram"
  // Ids decode() leaves out: control pieces, <unk>, HF's special added tokens.
  const std::vector<int64_t>& special_ids() const;

  struct Impl;  // src/data/tokenizers/sp_detail.h

 private:
  explicit SentencePieceTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace hp
