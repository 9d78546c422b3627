// Memory estimates (see header).
#include "headprune/model/memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "headprune/util/runtime.h"

namespace hp {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", b / kGiB);
  return buf;
}

// Elements alive in one layer's forward at B x T (the attention scores and probabilities, the
// projections, the feed-forward's intermediate), per attention type present.
double layer_elements(const ModelConfig& c, double B, double T) {
  const double C = static_cast<double>(c.d_model), D = static_cast<double>(c.head_dim),
               H = static_cast<double>(c.n_heads), G = static_cast<double>(c.effective_kv_heads()),
               F = static_cast<double>(c.d_ff);
  const double attn = B * T * (C * 3 + (H + 2 * G) * D + 2 * H * D) + 2 * B * H * T * T;
  const double ffn = B * T * F * (c.gated_ffn ? 3 : 2);
  return attn + ffn;
}
}  // namespace

std::string MemoryEstimate::describe() const {
  return "about " + gib(total()) + " GiB (weights " + gib(weights) + ", activations " + gib(activations) +
         ", copies " + gib(copies) + ")";
}

MemoryEstimate estimate_memory(const ModelConfig& cfg, torch::ScalarType dtype, int64_t batch, int64_t seq,
                               MemoryUse use, bool checkpointed) {
  MemoryEstimate m;
  const double params = cfg.approx_parameters();
  const double elem = static_cast<double>(c10::elementSize(dtype));
  const double B = static_cast<double>(std::max<int64_t>(batch, 1)), T = static_cast<double>(std::max<int64_t>(seq, 1));
  const double L = static_cast<double>(std::max<int64_t>(cfg.n_encoder_layers + cfg.n_decoder_layers, 1));
  const double V = static_cast<double>(cfg.arch == Arch::EncoderClassifier ? cfg.n_classes : cfg.effective_tgt_vocab());
  const double layer = layer_elements(cfg, B, T) * elem;
  const double logits = B * (cfg.arch == Arch::EncoderClassifier ? 1 : T) * V * 4.0;  // the loss in fp32
  const double hidden = B * T * static_cast<double>(cfg.d_model) * elem;
  switch (use) {
    case MemoryUse::Inference:
      m.weights = params * elem;
      m.activations = layer + 2 * logits;
      break;
    case MemoryUse::GateGradients:
      m.weights = params * elem;
      // Autograd keeps about three times a layer's forward set (inputs of every product and their
      // gradients); checkpointed, one layer's graph and a hidden state per layer.
      m.activations = (checkpointed ? 3 * layer + L * hidden : 3 * layer * L) + 3 * logits;
      break;
    case MemoryUse::Training:
      m.weights = params * 4.0;
      m.copies = params * 12.0;  // gradients and AdamW's two moments, fp32
      m.activations = 3 * layer * L + 3 * logits;
      break;
  }
  return m;
}

void check_memory(const MemoryEstimate& need, const torch::Device& device, const std::string& what,
                  const std::string& hint) {
  if (const char* v = std::getenv("HP_MEMORY_CHECK"); v && std::string(v) == "0") return;
  const double avail = static_cast<double>(available_memory_bytes(device));
  if (avail <= 0 || need.total() <= avail) return;
  throw std::runtime_error(what + " needs " + need.describe() + ", " + gib(avail) + " GiB available on " + device.str() +
                           (hint.empty() ? "" : "; " + hint) + " (HP_MEMORY_CHECK=0 runs it anyway)");
}

}  // namespace hp
