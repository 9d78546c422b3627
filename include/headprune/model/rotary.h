// Rotary position embedding (RoPE; Su et al. 2021), as the LLaMA family uses it: each head's queries
// and keys are rotated by position-dependent angles inside attention, in HF's "rotate half" layout
// (the first and second halves of the head dimension form the pairs), so relative positions shape
// the scores and nothing is added to the embeddings.
//
// Dimension legend: B batch, H heads, T positions, D head dim.
//   inv_freq [R/2]        theta^(-2i/R), then scaled (rope_scaling: linear, llama3); R = rotary_dim
//                         (partial rotary, Phi-3 / Phi-4), else D
//   cos, sin [T, R]       of positions offset .. offset+T-1: angle = position x inv_freq, repeated
//   rotated x             x * cos + rotate_half(x) * sin, rotate_half([x1, x2]) = [-x2, x1], on the
//                         first R channels of each head; the other D - R pass unrotated
// Head pruning does not touch it: every kept head is rotated exactly as before.
#pragma once

#include <torch/torch.h>

#include "headprune/config.h"

namespace hp {

// The rotation of the positions an input occupies.
struct Rope {
  torch::Tensor cos, sin;  // [T, D]
};

// Inverse frequencies [D/2] (float32) of a rotary config: HF's default, linear and llama3 rules.
torch::Tensor rope_inv_freq(const ModelConfig& cfg);

// Tables for positions offset .. offset+T-1, computed in float32 (as HF does) and cast to `dtype`.
Rope rope_tables(const torch::Tensor& inv_freq, int64_t offset, int64_t T, torch::ScalarType dtype);
// The same for the positions [T] (int64) holds, on its device.
Rope rope_tables(const torch::Tensor& inv_freq, const torch::Tensor& positions, torch::ScalarType dtype);

// x [B, H, T, D] rotated by the tables of its T positions.
torch::Tensor apply_rope(const torch::Tensor& x, const Rope& rope);

}  // namespace hp
