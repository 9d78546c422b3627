// Importance maps (importance.json as `importance --json` writes them).
#include "fuzz_util.h"
#include "headprune/score/head_scores.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("importance.json", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] {
    const auto maps = hp::read_maps(path);
    for (const auto& m : maps) (void)m.to_json().dump();
  }, {path});
  return 0;
}
