// Checkpoints: a directory with config.json (architecture, kept head ids per layer and
// attention type) and model.safetensors (weights and head gates). Loading builds the model
// from the config and copies the weights strictly. Writes are atomic per file.
#pragma once

#include <string>

#include "headprune/config.h"
#include "headprune/model/transformer.h"

namespace hp {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";

ModelConfig load_config(const std::string& dir);  // dir/config.json, strictly validated
Transformer load_checkpoint(const std::string& dir);
// Creates dir if needed; overwrites config.json and model.safetensors atomically.
void save_checkpoint(const std::string& dir, TransformerImpl& model);

// A human-readable architecture summary; per-layer head counts collapse to one number
// when uniform ("encoder_self heads: 4 x 2 layers" vs "[4, 2, 0]").
std::string describe(const ModelConfig& cfg);

}  // namespace hp
