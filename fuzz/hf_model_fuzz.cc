// An HF checkpoint directory: config.json and model.safetensors (two parts of one input).
#include <torch/torch.h>

#include "fuzz_util.h"
#include "headprune/io/hf.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = hp_fuzz::split(data, size, 2);
  const std::string config = hp_fuzz::write_file("config.json", parts[0]);
  const std::string weights = hp_fuzz::write_file("model.safetensors", parts[1]);
  hp_fuzz::expect_clean_rejection([&] { (void)hp::import_hf(hp_fuzz::work_dir()); }, {config, weights});
  return 0;
}
