// ggml's Q8_0 and Q4_0 blocks (see header).
#include "headprune/io/ggml_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <c10/util/Half.h>

namespace hp {

namespace {

constexpr int64_t kQk = kGgmlBlockValues;

uint64_t block_bytes(GgmlType t) { return t == GgmlType::Q8_0 ? 2 + kQk : 2 + kQk / 2; }

void put_scale(uint8_t* block, float d) {
  const c10::Half h(d);  // round to nearest even, as the F16C conversion ggml uses on x86
  std::memcpy(block, &h.x, 2);
}

float get_scale(const uint8_t* block) {
  c10::Half h;
  std::memcpy(&h.x, block, 2);
  return static_cast<float>(h);
}

void quantize_q8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_scale(block, d);
  for (int64_t j = 0; j < kQk; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

void quantize_q4_0(const float* x, uint8_t* block) {
  float amax = 0.0f, max = 0.0f;
  for (int64_t j = 0; j < kQk; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_scale(block, d);
  for (int64_t j = 0; j < kQk / 2; ++j) {
    const auto lo = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j] * id + 8.5f)));
    const auto hi = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[kQk / 2 + j] * id + 8.5f)));
    block[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_block(GgmlType t, const uint8_t* block, float* y) {
  const float d = get_scale(block);
  if (t == GgmlType::Q8_0) {
    for (int64_t j = 0; j < kQk; ++j) y[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
    return;
  }
  for (int64_t j = 0; j < kQk / 2; ++j) {
    y[j] = static_cast<float>((block[2 + j] & 0x0F) - 8) * d;
    y[kQk / 2 + j] = static_cast<float>((block[2 + j] >> 4) - 8) * d;
  }
}

void check_blocks(GgmlType t, int64_t cols, const char* what) {
  if (!is_block_type(t)) throw std::invalid_argument(std::string(what) + ": " + to_string(t) + " is not a block type");
  if (cols <= 0 || cols % kQk != 0)
    throw std::invalid_argument(std::string(what) + ": rows of " + std::to_string(cols) + " values do not split into " +
                                std::to_string(kQk) + "-value " + to_string(t) + " blocks");
}

}  // namespace

std::string to_string(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "f32";
    case GgmlType::F16: return "f16";
    case GgmlType::Q4_0: return "q4_0";
    case GgmlType::Q8_0: return "q8_0";
    case GgmlType::BF16: return "bf16";
  }
  return "ggml type " + std::to_string(static_cast<uint32_t>(t));
}

bool is_block_type(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

uint64_t ggml_row_bytes(GgmlType t, int64_t cols) {
  if (!is_block_type(t)) return static_cast<uint64_t>(cols) * (t == GgmlType::F32 ? 4 : 2);
  check_blocks(t, cols, "ggml_row_bytes");
  return static_cast<uint64_t>(cols / kQk) * block_bytes(t);
}

torch::Tensor quantize_blocks(const torch::Tensor& values, GgmlType t) {
  if (values.dim() != 2) throw std::invalid_argument("quantize_blocks: a 2-D tensor is quantized, not " + std::to_string(values.dim()) + "-D");
  check_blocks(t, values.size(1), "quantize_blocks");
  const torch::Tensor x = values.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t rows = x.size(0), n = x.numel() / kQk;
  const auto bb = static_cast<int64_t>(block_bytes(t));
  torch::Tensor out = torch::empty({rows, static_cast<int64_t>(ggml_row_bytes(t, x.size(1)))}, torch::kUInt8);
  const float* src = x.data_ptr<float>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (t == GgmlType::Q8_0)
        quantize_q8_0(src + b * kQk, dst + b * bb);
      else
        quantize_q4_0(src + b * kQk, dst + b * bb);
    }
  });
  return out;
}

torch::Tensor dequantize_blocks(const torch::Tensor& blocks, GgmlType t, int64_t cols) {
  check_blocks(t, cols, "dequantize_blocks");
  const auto row = static_cast<int64_t>(ggml_row_bytes(t, cols));
  if (blocks.dim() != 2 || blocks.scalar_type() != torch::kUInt8 || blocks.size(1) != row)
    throw std::invalid_argument("dequantize_blocks: expected uint8 blocks [rows, " + std::to_string(row) + "]");
  const torch::Tensor b = blocks.contiguous();
  torch::Tensor out = torch::empty({b.size(0), cols}, torch::kFloat32);
  const int64_t n = out.numel() / kQk;
  const auto bb = static_cast<int64_t>(block_bytes(t));
  const uint8_t* src = b.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t k = 0; k < n; ++k) dequantize_block(t, src + k * bb, dst + k * kQk);
  return out;
}

}  // namespace hp
