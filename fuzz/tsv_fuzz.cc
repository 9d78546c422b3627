// GLUE-style TSV classification files.
#include "fuzz_util.h"
#include "headprune/data/readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("train.tsv", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] { (void)hp::read_tsv_classification(path); }, {path});
  return 0;
}
