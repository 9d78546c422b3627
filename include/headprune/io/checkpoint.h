// Checkpoints: a directory with config.json (architecture, kept head ids per layer and
// attention type) and model.safetensors (weights and head gates). Loading builds the model
// from the config and copies the weights strictly. Writes are atomic per file.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "headprune/config.h"
#include "headprune/data/tokenizer.h"
#include "headprune/io/files.h"
#include "headprune/model/transformer.h"

namespace hp {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";

ModelConfig load_config(const std::string& dir);  // dir/config.json, strictly validated
// A headprune checkpoint, or a HuggingFace BERT / GPT-2 directory (see io/hf.h).
Transformer load_checkpoint(const std::string& dir);
constexpr const char* kTokenizerFile = "tokenizer.json";

// A checkpoint as the commands use it: the model and, when the directory has one, its tokenizer.
struct LoadedModel {
  std::string dir;
  Transformer model{nullptr};
  std::optional<Tokenizer> tokenizer;
};
LoadedModel open_model(const std::string& dir);

// Creates dir if needed; overwrites config.json, model.safetensors and each extra file
// (name -> bytes, e.g. the tokenizer) atomically.
void save_checkpoint(const std::string& dir, TransformerImpl& model,
                     const std::map<std::string, std::string>& extra_files = {});
// Reads dir/name if present (e.g. the tokenizer), else returns an empty string.
std::string read_checkpoint_file(const std::string& dir, const std::string& name);

// A human-readable architecture summary; per-layer head counts collapse to one number
// when uniform ("encoder_self heads: 4 x 2 layers" vs "[4, 2, 0]").
std::string describe(const ModelConfig& cfg);

}  // namespace hp
