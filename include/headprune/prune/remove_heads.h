// Physical head removal: slice the weights of the given heads out of a model.
//
// For each removed head h (original id) of an attention layer with head dim D, rows
// [p*D, (p+1)*D) of q/k/v weights and biases and the same columns of o_proj.weight go,
// where p is h's current position; o_proj.bias stays whole, head_gate loses entry p.
// The config keeps the original ids of the heads that remain, so removing twice works
// and a layer may end with no heads at all (it then skips attention).
#pragma once

#include <utility>
#include <vector>

#include "headprune/config.h"
#include "headprune/model/state.h"
#include "headprune/model/transformer.h"

namespace hp {

// Heads are checked with validate_heads (config.h) first.

// Pure: (config, weights, heads to drop) -> (config', weights').
std::pair<ModelConfig, TensorMap> remove_heads(const ModelConfig& cfg, const TensorMap& state,
                                               const std::vector<HeadId>& heads);

// Builds a fresh model of the pruned config and loads the sliced weights; keeps the
// device, dtype and train/eval mode of `model`. (Rebuild any optimizer afterwards.)
Transformer remove_heads(TransformerImpl& model, const std::vector<HeadId>& heads);

}  // namespace hp
