// A run config (model, data, training options; JSON with comments).
#include "fuzz_util.h"
#include "headprune/train/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("run.json", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] { (void)hp::read_run_config(path, /*require_model=*/false); }, {path});
  return 0;
}
