// Physical head removal: slice the weights of the given heads out of a model, as the head geometry
// (model/geometry.h) says each head owns them: a query head's rows of q_proj and columns of o_proj,
// and the rows of k_proj and v_proj of a key/value head none of whose query heads remain; biases
// where the layer has them; o_proj's bias stays whole and head_mask loses the head's entry.
// The config keeps the original ids of the heads that remain, so removing twice works and a layer
// may end with no heads at all (it then skips attention).
#pragma once

#include <functional>

#include <utility>
#include <vector>

#include "headprune/config.h"
#include "headprune/model/state.h"
#include "headprune/model/transformer.h"

namespace hp {

// Heads are checked with validate_heads (config.h) first.

// Pure: (config, weights, heads to drop) -> (config', weights').
// `replaced` (optional) is called after each attention layer is sliced, with the tensors of `state`
// that the slices replace: a caller that will not use them again can give their memory back.
using ReplacedFn = std::function<void(const std::vector<torch::Tensor>& replaced)>;
std::pair<ModelConfig, TensorMap> remove_heads(const ModelConfig& cfg, const TensorMap& state,
                                               const std::vector<HeadId>& heads, const ReplacedFn& replaced = {});

// The inverse shape, for runtimes with one head count for every layer (HF's dense export, io/hf.h):
// every attention layer back at the config's n_heads query and n_kv_heads key/value heads, each kept
// head's q/k/v rows where it was originally and its o_proj columns scaled by its mask, removed (and
// fully masked) heads zero, head masks all ones. An unpruned model of the returned config computes
// what the pruned, masked model computes (it does not run faster).
std::pair<ModelConfig, TensorMap> restore_head_shapes(const ModelConfig& cfg, const TensorMap& state);
// The same for one attention layer: its q/k/v/o tensors and head mask at the config's head counts
// (what restore_head_shapes puts in place of them), for writers that make one layer at a time.
TensorMap restore_layer_shapes(const ModelConfig& cfg, const TensorMap& state, AttnType type, int64_t layer);
ModelConfig restored_config(const ModelConfig& cfg);  // every layer back at n_heads

// Builds a fresh model of the pruned config and loads the sliced weights; keeps the
// device, dtype and train/eval mode of `model`. (Rebuild any optimizer afterwards.) Only the
// attention layers that lose heads are sliced (new tensors); with share_untouched the pruned model
// holds every other tensor of `model` itself (no copy: for models as large as memory; training one
// changes the other), else copies.
Transformer remove_heads(TransformerImpl& model, const std::vector<HeadId>& heads, bool share_untouched = false,
                         const ReplacedFn& replaced = {});

}  // namespace hp
