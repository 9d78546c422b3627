// Named tensors of a model (parameters and head-mask buffers) and strict loading into a built
// model: every name present, shapes equal, nothing left over.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include <torch/torch.h>

#include "headprune/model/transformer.h"

namespace hp {

using TensorMap = std::map<std::string, torch::Tensor>;

// "encoder.layers.3.self_attn", "decoder.layers.0.cross_attn", ...
std::string attention_prefix(AttnType type, int64_t layer);

// Parameters and buffers by their module path, detached (sharing storage with the model).
TensorMap state_dict(TransformerImpl& model);

// How load_state_strict puts the tensors in the model.
struct LoadStateOptions {
  // true: the model holds the state's tensors themselves (views into a mapped file stay views: no
  // copy, no memory); false: copies, so the state and the model can change independently.
  bool share = false;
  bool check_finite = true;                 // refuse NaN/Inf weights (reads every weight once)
  std::optional<torch::ScalarType> dtype;  // every floating tensor in this dtype (copies where it differs)
};

// Loads `state` into `model` strictly: every name present, shapes equal, nothing left over, integer
// dtypes equal; anything else is a std::runtime_error naming `source`, the tensor and expected vs got.
// The model takes the state's device and floating dtype (the dtype that holds most parameters, unless
// options.dtype; the few others are converted). The model may have been built under DeferredInit.
void load_state_strict(TransformerImpl& model, const TensorMap& state, const std::string& source,
                       const LoadStateOptions& options = {});

// Before a model is built from a config read beside a weights file: the parameters the config asks
// for (ModelConfig::approx_parameters) must be about what the file holds, else std::runtime_error
// naming `source` and both counts, so a hostile or mistaken config allocates nothing.
void check_tensors_fit(const ModelConfig& cfg, const TensorMap& tensors, const std::string& source);

// An export is as strict as an import: `what` (e.g. "HF export: gpt2 (GPT2LMHeadModel)") wrote the tensors
// named in `written`; any other tensor of `state` would be dropped and the file compute other logits, so
// it is a std::invalid_argument naming it. Head masks are never written (masked heads are removed or
// zeroed first), nor are tensors without elements (an emptied layer's projections), and a tensor sharing
// its storage with a written one (a tied table under a second name) is written.
void check_every_tensor_written(const TensorMap& state, const std::set<std::string>& written, const std::string& what);

std::string shape_str(at::IntArrayRef shape);  // "[4, 32]"

}  // namespace hp
