// sentencepiece model files (tokenizer.model, *.spm: a protobuf ModelProto, read by headprune's own
// wire-format reader) and HF's tokenizer.json of a SentencePiece-style model (two parts of one
// input); an accepted model encodes text and decodes the ids it produced.
#include "fuzz_util.h"
#include "headprune/data/sentencepiece.h"

namespace {

void exercise(const hp::SentencePieceTokenizer& t, const std::string& text) {
  for (const std::string& s : {text, std::string("a small test, with \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 and 12 digits  ")}) {
    try {
      (void)t.decode(t.encode(s));
      (void)t.tokenize(s);
    } catch (const std::invalid_argument&) {  // an unknown character and no unknown piece
    }
  }
  for (int64_t i = 0; i < std::min<int64_t>(t.vocab_size(), 64); ++i) {
    try {
      (void)t.token(i);
    } catch (const std::invalid_argument&) {  // a hole in the ids
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = hp_fuzz::split(data, size, 3);
  const std::string model = hp_fuzz::write_file("tokenizer.model", parts[0]);
  const std::string json = hp_fuzz::write_file("tokenizer.json", parts[1]);
  hp_fuzz::expect_clean_rejection([&] { exercise(hp::SentencePieceTokenizer::load(model), parts[2]); }, {model});
  hp_fuzz::expect_clean_rejection([&] { exercise(hp::SentencePieceTokenizer::from_tokenizer_json(json), parts[2]); }, {json});
  return 0;
}
