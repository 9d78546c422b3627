// GPT-2 byte-level BPE: vocab.json and merges.txt (two parts of one input); an accepted pair encodes
// text and decodes the ids it produced.
#include "fuzz_util.h"
#include "headprune/data/hf_tokenizers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = hp_fuzz::split(data, size, 3);
  const std::string vocab = hp_fuzz::write_file("vocab.json", parts[0]);
  const std::string merges = hp_fuzz::write_file("merges.txt", parts[1]);
  hp_fuzz::expect_clean_rejection([&] {
    const auto bpe = hp::ByteLevelBpeTokenizer::load(vocab, merges);
    (void)bpe.vocab_size();
    try {
      (void)bpe.decode(bpe.encode(parts[2]));
    } catch (const std::invalid_argument&) {  // a byte with no token in this vocabulary
    }
  }, {vocab, merges});
  return 0;
}
