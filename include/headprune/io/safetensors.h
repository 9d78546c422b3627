// safetensors reader/writer (our own): 8-byte little-endian header length N, N bytes of
// JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the raw little-endian tensor data, offsets relative to the end of the header.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

#include "headprune/model/state.h"

namespace hp {

struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
};

// Every malformation (too short, truncated, bad JSON, unknown dtype, inconsistent shape
// and offsets, overlapping data) is a std::runtime_error naming `source` and the tensor.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source);
SafetensorsFile read_safetensors(const std::string& path);

std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});
// Atomic (temp file + rename).
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

std::string safetensors_dtype_name(torch::ScalarType t);  // "F32", ...; throws if unsupported

}  // namespace hp
