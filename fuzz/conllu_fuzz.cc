// CoNLL-U treebanks (Universal Dependencies).
#include "fuzz_util.h"
#include "headprune/data/readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("ud.conllu", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] { (void)hp::read_conllu(path); }, {path});
  return 0;
}
