// The end-to-end demo on the built-in synthetic tasks: for each model family, build a
// model, score heads by |d loss / d gate| in one backward pass, mask the weakest heads and
// one whole layer, remove the same heads physically, and show what changed (loss, outputs,
// parameters, heads per layer, forward time), then save, reload and describe the result.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headprune/config.h"

namespace hp {

struct DemoOptions {
  std::vector<Arch> families = {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder};
  std::string out_dir = "runs/demo";  // pruned checkpoints go to out_dir/<family>
  double prune_fraction = 0.25;      // of the heads, by smallest gate gradient
  int64_t batch_size = 32;
  uint64_t seed = 1234;
};

// Prints a report to `out` and returns the same numbers as JSON.
nlohmann::json run_demo(const DemoOptions& opts, std::ostream& out);

}  // namespace hp
