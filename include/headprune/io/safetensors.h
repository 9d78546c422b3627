// safetensors reader/writer (our own): 8-byte little-endian header length N, N bytes of
// JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the raw little-endian tensor data, offsets relative to the end of the header.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "headprune/model/state.h"

namespace hp {

struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
};

// Every malformation (too short, truncated, bad JSON, unknown dtype, inconsistent shape
// and offsets, overlapping data) is a std::runtime_error naming `source` and the tensor.
// parse_safetensors copies the tensors out of `bytes`.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source);
// Maps the file (mmap, private: nothing is ever written back) and returns its tensors in their stored
// dtype as views into the mapping, which stays as long as any of them: nothing is read until a tensor
// is used, and the file may be larger than memory. Only the header is read here, bounded (100 MB) and
// checked like parse_safetensors' against the file's size. (A tensor whose data is not aligned to its
// element size is copied.) The file must not be truncated while its tensors are in use.
SafetensorsFile read_safetensors(const std::string& path);

// For a tensor of read_safetensors that will not be used again (its values are still right if it is):
// takes its pages out of this process's memory now, instead of when the tensor dies. False (nothing
// done) for a tensor that is not a view into a mapped file. A tensor changed in place must not be
// released: its pages come back as the file has them.
bool release_mapped_pages(const torch::Tensor& t);

// The header only: names, dtypes and shapes (for `info`), and the file's size.
struct SafetensorsHeader {
  struct Entry {
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  std::map<std::string, Entry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t file_bytes = 0;
};
SafetensorsHeader read_safetensors_header(const std::string& path);

// A tensor to write, made when its turn comes (a checkpoint far larger than memory is written one
// tensor at a time: views into mapped files cost nothing, a tensor computed for the file lives only
// while it is written).
struct LazyTensor {
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  std::function<torch::Tensor()> make;  // must give exactly that dtype and shape
  static LazyTensor of(const torch::Tensor& t);
  uint64_t nbytes() const;  // from the dtype and shape, nothing made
  // Makes the tensor, checks it is the declared dtype and shape (std::logic_error naming `name`), and
  // writes its bytes (in pieces of at most 1 GiB); the tensor is dropped afterwards. Every model-file
  // writer streams its weights through here (safetensors, GGUF, ONNX).
  void write_to(std::ostream& out, const std::string& name) const;
};

std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});
// Atomic (scratch file + rename), streamed: no second copy of the tensors is made.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// STEM.safetensors when everything fits in max_shard_bytes, else HF's sharded layout:
// STEM-00001-of-0000N.safetensors ... and STEM.safetensors.index.json ({"metadata": {"total_size"},
// "weight_map": {name: file}}). Each file atomic. Returns the files written.
constexpr uint64_t kDefaultShardBytes = 5ull << 30;  // 5 GiB, as HF's save_pretrained
std::vector<std::string> write_safetensors_sharded(const std::string& dir, const std::string& stem,
                                                   const std::map<std::string, LazyTensor>& tensors,
                                                   const std::map<std::string, std::string>& metadata = {},
                                                   uint64_t max_shard_bytes = kDefaultShardBytes);

std::string safetensors_dtype_name(torch::ScalarType t);  // "F32", ...; throws if unsupported

}  // namespace hp
