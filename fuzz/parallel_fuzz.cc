// Line-aligned parallel text: two files (two parts of one input).
#include "fuzz_util.h"
#include "headprune/data/readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = hp_fuzz::split(data, size, 2);
  const std::string src = hp_fuzz::write_file("train.de", parts[0]);
  const std::string tgt = hp_fuzz::write_file("train.en", parts[1]);
  hp_fuzz::expect_clean_rejection([&] { (void)hp::read_parallel(src, tgt); }, {src, tgt});
  return 0;
}
