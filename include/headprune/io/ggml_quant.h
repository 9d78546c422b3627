// ggml's tensor types as GGUF stores them, and its two simplest block formats (ggml-common.h's
// block_q8_0 / block_q4_0, quantized as ggml-quants.c's reference quantizers do, the ones llama.cpp and
// its converter use for files): a row of n values is n / 32 blocks of 32, each block one float16 scale
// d followed by the quantized values.
//   Q8_0: d = max|x| / 127, q = round(x / d) as int8 (half away from zero); 34 bytes per block.
//   Q4_0: m = the value of largest magnitude (its sign kept), d = m / -8, q = min(15, trunc(x / d + 8.5))
//         as 4 bits: byte j holds value j in its low nibble and value j + 16 in its high one; 18 bytes
//         per block; x = (q - 8) d.
// The inverse of the scale is taken from the float32 scale before it is rounded to float16, as ggml does,
// so a file written here has ggml's own bytes.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace hp {

// ggml tensor types written and read here (ggml_type's numbers).
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, BF16 = 30 };
std::string to_string(GgmlType t);  // "f32", "f16", "q4_0", "q8_0", "bf16"

constexpr int64_t kGgmlBlockValues = 32;  // values per Q8_0 / Q4_0 block
bool is_block_type(GgmlType t);           // Q8_0 or Q4_0
// Bytes of a row of `cols` values; for a block type `cols` must be a multiple of 32 (std::invalid_argument).
uint64_t ggml_row_bytes(GgmlType t, int64_t cols);

// A float tensor [rows, cols] (cols a multiple of 32) as its blocks: uint8 [rows, ggml_row_bytes(t, cols)].
torch::Tensor quantize_blocks(const torch::Tensor& values, GgmlType t);
// Blocks uint8 [rows, ggml_row_bytes(t, cols)] back to float32 [rows, cols].
torch::Tensor dequantize_blocks(const torch::Tensor& blocks, GgmlType t, int64_t cols);

}  // namespace hp
