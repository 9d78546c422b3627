// A pruning plan (plan.json), validated against the built-in models' configs.
#include "fuzz_util.h"
#include "headprune/config.h"
#include "headprune/prune/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp_fuzz::write_file("plan.json", std::string(reinterpret_cast<const char*>(data), size));
  hp_fuzz::expect_clean_rejection([&] {
    const hp::PruningPlan plan = hp::read_plan(path);
    for (hp::Arch a : {hp::Arch::EncoderClassifier, hp::Arch::DecoderLM, hp::Arch::EncoderDecoder}) {
      try {
        hp::validate_plan(plan, hp::tiny_config(a));
      } catch (const std::invalid_argument&) {  // a plan for another model: named by head, checked below
      }
    }
  }, {path});
  return 0;
}
