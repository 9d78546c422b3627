// A headprune model config.json: parsed, validated, and an accepted config builds its model.
#include <torch/torch.h>

#include "fuzz_util.h"
#include "headprune/model/transformer.h"
#include "headprune/train/run_config.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("config.json", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] {
    const hp::ModelConfig cfg = hp::read_model_config(path);
    // Building allocates the parameters: small models only, so each run stays fast (the bounds on
    // large ones are the config's limits and the memory check, tested in the unit tests).
    if (cfg.approx_parameters() <= 2e6) {
      hp::Transformer model(cfg);
      (void)model;
    }
  }, {path});
  return 0;
}
