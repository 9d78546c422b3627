// The end-to-end demo on the built-in synthetic tasks. For each model family: train a small
// model, score every head by |d loss / d gate| over the validation set (Michel et al.),
// mask the weakest heads plus one whole layer, remove the same heads physically, fine-tune
// the smaller model with the trainer, and report heads, parameters, the task metric and
// forward time at each stage; save, reload and describe the pruned checkpoint.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headprune/config.h"

namespace hp {

struct DemoOptions {
  std::vector<Arch> families = {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder};
  std::string out_dir = "runs/demo";  // per family: <out_dir>/<family>/{train,finetune,pruned}
  double prune_fraction = 0.5;        // of all heads, including one emptied layer
  int64_t train_steps = 300;
  int64_t finetune_steps = 100;
  uint64_t seed = 1234;
};

// Prints a report to `out` and returns the same numbers as JSON.
nlohmann::json run_demo(const DemoOptions& opts, std::ostream& out);

}  // namespace hp
