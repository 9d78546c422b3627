// A model directory as the jobs use it: the model (headprune checkpoint or HF directory) together
// with its tokenizer, and the tokenizer files that every model derived from it carries along.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "headprune/data/tokenizer.h"
#include "headprune/io/load_options.h"
#include "headprune/model/transformer.h"

namespace hp {

constexpr const char* kTokenizerFile = "tokenizer.json";  // headprune's own BPE, inside a checkpoint
// The config.json of the HF directory a checkpoint was made from, carried along (tokenizer_files) so an
// export of the pruned model keeps what headprune does not model: bos/eos ids, architectures, ...
constexpr const char* kHfBaseConfigFile = "hf_config.json";

struct LoadedModel {
  std::string dir;
  Transformer model{nullptr};  // in eval mode, on the device it was opened on
  // The weights' dtype as loaded (LoadOptions::dtype, or as stored): f16 also where the model computes
  // in fp32 (f16 on the CPU, model/precision.h), which the model's own parameters then show.
  torch::ScalarType dtype = torch::kFloat;
  std::optional<Tokenizer> tokenizer;
  // name -> bytes: headprune's tokenizer.json, or an HF tokenizer's vocab.txt / vocab.json /
  // merges.txt / tokenizer_config.json; and hf_config.json (kHfBaseConfigFile) for a model from an HF
  // directory. Written into every checkpoint made from this model.
  std::map<std::string, std::string> tokenizer_files;
};

// Loads the model (strictly) and moves it to `device`; reads headprune's tokenizer.json, else an HF
// tokenizer (vocab.txt or vocab.json + merges.txt). A tokenizer larger than the model's vocabulary is
// an error naming the directory.
LoadedModel open_model(const std::string& dir, const torch::Device& device = torch::kCPU, const LoadOptions& options = {});

// The one rule for a model's tokenizer, said wherever both are read (open_model, info, tokenize): its
// vocabulary must fit the model's (ids the model has no row for would fail later, or index out of
// range). std::runtime_error naming `dir` and both sizes.
void check_tokenizer_fits(const Tokenizer& tokenizer, int64_t model_vocab, const std::string& dir);

// The tokenizer of a model directory or tokenizer folder: headprune's own tokenizer.json, else an HF
// tokenizer (load_hf_tokenizer); std::nullopt when there is none.
std::optional<Tokenizer> load_tokenizer(const std::string& dir);

// Whether a tokenizer.json is headprune's own BPE ("type": "headprune-bpe") rather than HF's.
bool is_headprune_tokenizer(const std::string& path);

// The tokenizer files of a directory (see LoadedModel::tokenizer_files).
std::map<std::string, std::string> tokenizer_files(const std::string& dir);

}  // namespace hp
