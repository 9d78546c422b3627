// Memory estimates (see header).
#include "headprune/model/memory.h"

#include <algorithm>
#include <cstdio>

#include "headprune/model/geometry.h"
#include "headprune/util/runtime.h"

namespace hp {

std::string MemoryEstimate::describe() const {
  return "weights " + format_gib(weights) + ", activations " + format_gib(activations) + ", copies " + format_gib(copies);
}

MemoryEstimate estimate_memory(const ModelConfig& cfg, torch::ScalarType dtype, int64_t batch, int64_t seq,
                               MemoryUse use, bool checkpointed) {
  MemoryEstimate m;
  const double params = cfg.approx_parameters();
  const double elem = static_cast<double>(c10::elementSize(dtype));
  const double B = static_cast<double>(std::max<int64_t>(batch, 1)), T = static_cast<double>(std::max<int64_t>(seq, 1));
  const double L = static_cast<double>(std::max<int64_t>(cfg.n_encoder_layers + cfg.n_decoder_layers, 1));
  const double hidden = B * T * static_cast<double>(cfg.d_model) * elem;
  switch (use) {
    case MemoryUse::Inference:
      m.weights = params * elem;
      m.activations = forward_memory_bytes(cfg, batch, seq, false, elem);
      break;
    case MemoryUse::GateGradients: {
      m.weights = params * elem;
      const double graph = forward_memory_bytes(cfg, batch, seq, true, elem);  // every layer kept for backward
      // Checkpointed: one layer's graph (a share of the whole), a hidden state per layer, and the output
      // layer's logits with their gradient (in the whole graph's count already).
      m.activations = checkpointed ? graph / L + L * hidden + forward_memory_bytes(cfg, batch, seq, false, elem) : graph;
      break;
    }
    case MemoryUse::Training:
      m.weights = params * 4.0;
      m.copies = params * 12.0;  // gradients and AdamW's two moments, fp32
      m.activations = forward_memory_bytes(cfg, batch, seq, true, 4.0);
      break;
  }
  (void)T;
  return m;
}

void check_fits(const MemoryEstimate& need, const torch::Device& device, const std::string& what,
                const std::string& hint) {
  check_memory(need.total(), device, what + " (" + need.describe() + ")", hint);
}

}  // namespace hp
