// Run configs shared by `train` and `eval`: {"model": ModelConfig, "data": data spec,
// "train": TrainOptions}. The model's vocab_size may be left out when a tokenizer is trained.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "headprune/config.h"
#include "headprune/train/trainer.h"

namespace hp {

struct RunConfig {
  ModelConfig model;
  nlohmann::json data;
  TrainOptions train;
  nlohmann::json to_json(const TrainOptions& effective) const;
};

// Errors name the file. Without require_model, a file with only "data" (and "train") sections is
// accepted, for commands that evaluate or fine-tune an existing checkpoint (rc.model is then default).
RunConfig read_run_config(const std::string& path, bool require_model = true);
// A model config alone: a bare model object (with "vocab_size") or a run config's "model" section.
ModelConfig read_model_config(const std::string& path);
RunConfig synthetic_run_config(Arch arch);           // the built-in task

}  // namespace hp
