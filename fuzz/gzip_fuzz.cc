// The gzip path of the line reader (every corpus may be .gz). The corpus holds gzip streams; a
// mutated stream must be rejected cleanly or decompress.
#include "fuzz_util.h"
#include "headprune/data/readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("corpus.txt.gz", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] { (void)hp::read_lines(path); }, {path});
  return 0;
}
