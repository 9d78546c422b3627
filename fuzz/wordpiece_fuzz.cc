// BERT WordPiece vocab.txt, then arbitrary text (second part of the input) through it.
#include "fuzz_util.h"
#include "headprune/data/hf_tokenizers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = hp_fuzz::split(data, size, 2);
  const std::string vocab = hp_fuzz::write_file("vocab.txt", parts[0]);
  hp_fuzz::expect_clean_rejection([&] {
    const auto wp = hp::WordPieceTokenizer::load(vocab, {});
    (void)wp.decode(wp.encode(parts[1]));
  }, {vocab});
  return 0;
}
