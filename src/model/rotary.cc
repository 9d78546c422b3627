// Rotary position embedding (see header).
#include "headprune/model/rotary.h"

#include <cmath>
#include <vector>

namespace hp {

torch::Tensor rope_inv_freq(const ModelConfig& cfg) {
  const int64_t D = cfg.rotary_dim > 0 ? cfg.rotary_dim : cfg.head_dim;  // the rotated channels
  const auto& s = cfg.rope_scaling;
  std::vector<float> out;
  for (int64_t i = 0; i < D; i += 2) {
    double f = 1.0 / std::pow(cfg.rope_theta, static_cast<double>(i) / static_cast<double>(D));
    switch (s.type) {
      case RopeScalingType::Default: break;
      case RopeScalingType::Linear: f /= s.factor; break;
      case RopeScalingType::Llama3: {
        // Long wavelengths (beyond the pre-training context / low_freq_factor) are slowed down by
        // `factor`, short ones (below context / high_freq_factor) kept, those between interpolated.
        const double ctx = static_cast<double>(s.original_max_positions);
        const double wavelen = 2.0 * M_PI / f;
        const double low_wavelen = ctx / s.low_freq_factor, high_wavelen = ctx / s.high_freq_factor;
        if (wavelen > low_wavelen) {
          f /= s.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth = (ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          f = (1.0 - smooth) * f / s.factor + smooth * f;
        }
        break;
      }
    }
    out.push_back(static_cast<float>(f));
  }
  return torch::tensor(out, torch::kFloat);
}

Rope rope_tables(const torch::Tensor& inv_freq, int64_t offset, int64_t T, torch::ScalarType dtype) {
  return rope_tables(inv_freq, torch::arange(offset, offset + T, inv_freq.options().dtype(torch::kLong)), dtype);
}

Rope rope_tables(const torch::Tensor& inv_freq, const torch::Tensor& positions, torch::ScalarType dtype) {
  const auto pos = positions.to(inv_freq.options());    // float32 (exact up to 2^24), on inv_freq's device
  const auto freqs = torch::outer(pos, inv_freq);       // [T, D/2]
  const auto angles = torch::cat({freqs, freqs}, -1);  // [T, D]
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

torch::Tensor apply_rope(const torch::Tensor& x, const Rope& rope) {
  const int64_t R = rope.cos.size(-1), D = x.size(-1);
  if (R < D)  // partial rotary: the first R channels turn, the others pass as they are
    return torch::cat({apply_rope(x.narrow(-1, 0, R), rope), x.narrow(-1, R, D - R)}, -1);
  const int64_t half = D / 2;
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * rope.cos + rotated * rope.sin;
}

}  // namespace hp
