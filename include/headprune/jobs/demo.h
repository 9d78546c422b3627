// The end-to-end demo on the built-in synthetic tasks, made of the same job calls as the command
// line. For each model family: train a small model (run_train), score every head by |d loss / d xi_h|
// over the validation set (run_importance, Michel et al.), plan one whole attention layer plus the
// weakest other heads, mask, remove physically and fine-tune (run_prune), and time the model before and
// after (run_bench). Prints a report and returns the same numbers as JSON: {"families": [...],
// "environment": {cpu, threads, BLAS, ...}, "wall_s"}.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headprune/config.h"
#include "headprune/jobs/job.h"

namespace hp {

struct DemoOptions {
  std::vector<Arch> families = {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder};
  // Per family: <out_dir>/<family>/{train,pruned}. The demo replaces its own earlier output there;
  // a directory holding anything else is refused unless `overwrite`.
  std::string out_dir = "runs/demo";
  bool overwrite = false;
  // Also write the results here ("" = no). Inside out_dir (OUT/summary.json) it is part of the demo's
  // output; elsewhere it replaces only an earlier demo result.
  std::string json_path;
  double prune_fraction = 0.5;        // of all heads, including one emptied layer
  int64_t train_steps = 0;            // per family; 0 = the family's default (demo_train_steps)
  int64_t finetune_steps = 100;
};

// Training steps the demo gives a family by default: enough for it to learn its task.
int64_t demo_train_steps(Arch family);

// The demo's --json output outside its directory (io/outputs.h).
OutputFile demo_json_output(const std::string& path);

nlohmann::json run_demo(const DemoOptions& opts, const Runtime& rt, std::ostream& out, const JobEvents& events = {});

}  // namespace hp
