// GGUF, llama.cpp's model file (version 3; our own reader and writer, from the format's description in
// ggml's docs/gguf.md): "GGUF", version, tensor count, metadata count (all little-endian); the metadata
// as key, type, value; one record per tensor (name, dimensions innermost first, ggml type, offset in
// the data section); padding to `general.alignment` (32); the tensor data, each tensor aligned.
//
// Types written here: the metadata's scalars, strings and arrays of one type; tensors F32, F16, BF16
// and the block formats Q8_0 and Q4_0 (io/ggml_quant.h). A torch tensor [rows, cols] is the ggml
// tensor ne = {cols, rows}: the same bytes, the dimensions listed in reverse.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "headprune/io/ggml_quant.h"
#include "headprune/io/safetensors.h"

namespace hp {

// GGUF's metadata value types (gguf_type).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12
};
std::string to_string(GgufType t);

// One metadata value: a scalar, a string, or an array of scalars or strings (all of `elem`'s type).
struct GgufValue {
  GgufType type = GgufType::U32;
  GgufType elem = GgufType::U32;  // arrays
  int64_t i = 0;                  // integer and bool scalars
  double f = 0;                   // float scalars
  std::string s;
  std::vector<int64_t> ints;      // integer and bool arrays
  std::vector<double> floats;     // float arrays
  std::vector<std::string> strings;

  static GgufValue u32(int64_t v);
  static GgufValue i32(int64_t v);
  static GgufValue f32(double v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  static GgufValue array(GgufType elem, std::vector<int64_t> v);  // integer or bool elements
  static GgufValue f32s(std::vector<double> v);
  static GgufValue strs(std::vector<std::string> v);
  bool is_array() const { return type == GgufType::Array; }
  size_t size() const;  // elements of an array, else 1
};

GgmlType ggml_type_of(torch::ScalarType t);  // float32, float16, bfloat16; else std::invalid_argument

struct GgufTensor {
  std::string name;
  // F32, F16, BF16 (`blocks` unset): the values, torch dtype float32, float16 or bfloat16. Q8_0, Q4_0:
  // their blocks, uint8 [rows, ggml_row_bytes], of a float tensor of `shape`. Made when written.
  LazyTensor data;
  std::optional<GgmlType> blocks;
  std::vector<int64_t> shape;  // with `blocks`: the values' shape (torch order)
  GgmlType type() const { return blocks ? *blocks : ggml_type_of(data.dtype); }
  const std::vector<int64_t>& dims() const { return blocks ? shape : data.shape; }
};
// A float tensor [rows, cols] (cols a multiple of 32) stored as Q8_0 or Q4_0, quantized when written.
GgufTensor quantized_gguf_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                                 std::function<torch::Tensor()> make_values);

struct GgufFile {
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in the file's order; keys distinct
  std::vector<GgufTensor> tensors;                            // in the file's order; names distinct
  uint64_t alignment = 32;
};

// The bytes up to the data section (header, metadata, tensor records, padding), and the whole file
// streamed: each tensor made, written and dropped in turn (no second copy of the weights).
void write_gguf(std::ostream& out, const GgufFile& file);

// What a reader sees: metadata and tensor records, the data section's offset and the file's size.
struct GgufInfo {
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;  // ggml order, innermost first
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;      // in the data section
  };
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<Tensor> tensors;
  uint64_t data_offset = 0, file_size = 0;
};
// Reads and checks a file's header, metadata and tensor records (every count, length, type and offset
// against the file's size; tensor types F32, F16, BF16, Q8_0, Q4_0): std::runtime_error naming the path
// and what is wrong. Tensor data is read only by gguf_tensor.
GgufInfo read_gguf_info(const std::string& path);
// One tensor's data as a torch tensor in torch order (the dimensions reversed): F32, F16, BF16 in their
// own dtype, Q8_0 and Q4_0 dequantized to float32.
torch::Tensor gguf_tensor(const std::string& path, const GgufInfo& info, const std::string& name);

}  // namespace hp
