// safetensors: header and data. An accepted file must survive a write/read round trip unchanged.
#include <torch/torch.h>

#include "fuzz_util.h"
#include "headprune/io/safetensors.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  hp_fuzz::expect_clean_rejection([&] {
    const hp::SafetensorsFile f = hp::parse_safetensors(bytes, "fuzz.safetensors");
    const hp::SafetensorsFile g = hp::parse_safetensors(hp::serialize_safetensors(f.tensors, f.metadata), "round trip");
    if (g.tensors.size() != f.tensors.size() || g.metadata != f.metadata) hp_fuzz::finding("round trip changed the file");
    for (const auto& [name, t] : f.tensors) {
      const auto it = g.tensors.find(name);
      if (it == g.tensors.end() || it->second.sizes() != t.sizes() || it->second.scalar_type() != t.scalar_type())
        hp_fuzz::finding("round trip changed tensor " + name);
      if (t.numel() > 0 && !torch::equal(it->second, t) && !t.is_floating_point()) hp_fuzz::finding("round trip changed data of " + name);
    }
  }, {"fuzz.safetensors"});
  return 0;
}
