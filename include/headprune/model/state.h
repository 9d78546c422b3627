// Named tensors of a model (parameters and head-mask buffers) and strict loading into a built
// model: every name present, shapes equal, nothing left over.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

#include "headprune/model/transformer.h"

namespace hp {

using TensorMap = std::map<std::string, torch::Tensor>;

// "encoder.layers.3.self_attn", "decoder.layers.0.cross_attn", ...
std::string attention_prefix(AttnType type, int64_t layer);

// Parameters and buffers by their module path, detached (sharing storage with the model).
TensorMap state_dict(TransformerImpl& model);

// Copies `state` into `model` strictly. Floating tensors of another floating dtype are
// converted; anything else that differs is a std::runtime_error naming `source`, the tensor
// and expected vs got (missing tensor, unexpected tensor, shape, dtype).
void load_state_strict(TransformerImpl& model, const TensorMap& state, const std::string& source);

// Before a model is built from a config read beside a weights file: the parameters the config asks
// for (ModelConfig::approx_parameters) must be about what the file holds, else std::runtime_error
// naming `source` and both counts, so a hostile or mistaken config allocates nothing.
void check_tensors_fit(const ModelConfig& cfg, const TensorMap& tensors, const std::string& source);

std::string shape_str(at::IntArrayRef shape);  // "[4, 32]"

}  // namespace hp
