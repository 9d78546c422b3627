// headprune's tokenizer.json; an accepted tokenizer encodes and decodes text.
#include "fuzz_util.h"
#include "headprune/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("tokenizer.json", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] {
    const hp::Tokenizer tok = hp::Tokenizer::load(path);
    const auto ids = tok.encode("a small test, with ünïcödé and 12 digits");
    (void)tok.decode(ids);
    for (int64_t i = 0; i < std::min<int64_t>(tok.vocab_size(), 64); ++i) (void)tok.piece(i);
  }, {path});
  return 0;
}
