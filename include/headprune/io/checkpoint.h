// Checkpoints: a directory with config.json (architecture, kept head ids per layer and
// attention type) and model.safetensors (weights and head masks). Loading builds the model
// from the config and copies the weights strictly. Writes are atomic per file.
//
// Versions: 2 (this one) names the mask buffers "head_mask"; version 1 named them "head_gate" and is
// read as well. A checkpoint of a later version is an error that names the version.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "headprune/config.h"
#include "headprune/io/files.h"
#include "headprune/io/load_options.h"
#include "headprune/model/transformer.h"

namespace hp {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kWeightsIndexFile = "model.safetensors.index.json";  // sharded (HF's layout)
constexpr int64_t kCheckpointVersion = 2;

ModelConfig load_config(const std::string& dir);  // dir/config.json, strictly validated
// A headprune checkpoint, or a HuggingFace directory (see io/hf.h), on the CPU in eval mode: its
// weights mapped from the files (model.safetensors, or the shards of model.safetensors.index.json)
// and held as they are stored unless `options` ask for a dtype.
Transformer load_checkpoint(const std::string& dir, const LoadOptions& options = {});

// Creates dir if needed; overwrites config.json, model.safetensors and each extra file
// (name -> bytes, e.g. the tokenizer) atomically.
// dtype: the floating tensors written in it (converted as they are written); unset: as the model holds them.
void save_checkpoint(const std::string& dir, TransformerImpl& model,
                     const std::map<std::string, std::string>& extra_files = {},
                     std::optional<torch::ScalarType> dtype = std::nullopt);
// Reads dir/name if present (e.g. the tokenizer), else returns an empty string.
std::string read_checkpoint_file(const std::string& dir, const std::string& name);

// A human-readable architecture summary; per-layer head counts collapse to one number
// when uniform ("encoder_self heads: 4 x 2 layers" vs "[4, 2, 0]").
std::string describe(const ModelConfig& cfg);

}  // namespace hp
