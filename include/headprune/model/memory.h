// What running a model needs in memory, estimated before a job starts: a job that would not fit
// refuses with the numbers and a way out, instead of swapping for an hour or being killed.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "headprune/config.h"

namespace hp {

enum class MemoryUse {
  Inference,      // forward passes without autograd (eval, bench, ablation scores)
  GateGradients,  // gradients for the head gates only (no weight gradients): gradient importance
  Training,       // fp32 weights, their gradients and AdamW's two moments, all activations
};

struct MemoryEstimate {
  double weights = 0;      // bytes of the weights as held (mapped files count: they must stay resident)
  double activations = 0;  // the largest live set of activations at the batch and length
  double copies = 0;       // what the job copies besides (a dtype conversion, optimizer state, ...)
  double total() const { return weights + activations + copies; }
  std::string describe() const;  // "weights 13.5 GiB, activations 1.2 GiB, copies 0.0 GiB"
};

// batch x seq tokens per pass (encoder-decoder: the same length on both sides); the activations from
// forward_memory_bytes (model/geometry.h). GateGradients with `checkpointed` keeps one hidden state
// per layer and one layer's graph at a time (layer-by-layer recomputation), else the whole graph.
MemoryEstimate estimate_memory(const ModelConfig& cfg, torch::ScalarType dtype, int64_t batch, int64_t seq,
                               MemoryUse use, bool checkpointed = false);

// util/runtime.h's check_memory with the estimate's parts named: "WHAT (weights ..., activations ...)
// needs about X GiB of memory, Y GiB available; HINT".
void check_fits(const MemoryEstimate& need, const torch::Device& device, const std::string& what,
                const std::string& hint);

}  // namespace hp
