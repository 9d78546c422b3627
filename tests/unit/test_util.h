// Shared helpers for the unit tests: seeded models with random (non-zero) weights, and
// scratch directories.
#pragma once

#include <string>

#include "headprune/config.h"
#include "headprune/data/synthetic.h"
#include "headprune/model/transformer.h"

namespace hp::test {

// A tiny model of the family with random weights and biases, in eval mode (no dropout).
Transformer make_model(Arch arch, uint64_t seed = 7, torch::ScalarType dtype = torch::kFloat);
Transformer make_model(const ModelConfig& cfg, uint64_t seed = 7, torch::ScalarType dtype = torch::kFloat);
Batch make_batch(const ModelConfig& cfg, uint64_t seed = 11, int64_t batch_size = 4);

// A fresh, empty directory under the system temp dir; removed by the destructor.
struct TempDir {
  TempDir();
  ~TempDir();
  std::string path;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace hp::test
