// ONNX models, written without the onnx or protobuf libraries (LibTorch's protobuf clashes with
// Debian's): a graph built node by node (OnnxGraph) and a ModelProto written from it, the weights
// streamed from lazy tensors into their initializers (util/protowire.h gives the wire format; field
// numbers from onnx.proto). IR version 8, opset 17 of the default domain, and version 1 of Microsoft's
// com.microsoft domain (ONNX Runtime's contrib ops, e.g. its fused Attention).
//
// Protobuf cannot read a message of 2 GiB or more: a larger model's weights go to an external data
// file (OnnxExternalData: ONNX's TensorProto.external_data, location/offset/length, each tensor at a
// 4 KiB-aligned offset); written whole, such a model is refused (std::invalid_argument naming the size)
// rather than written as a file no runtime opens.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "headprune/io/safetensors.h"

namespace hp {

// TensorProto.DataType values used here.
enum class OnnxType : int32_t { Float = 1, Int32 = 6, Int64 = 7, Bool = 9 };

struct OnnxAttr {
  std::string name;
  enum class Kind { Float = 1, Int = 2, String = 3, Floats = 6, Ints = 7 } kind = Kind::Int;
  double f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  static OnnxAttr of(std::string name, int64_t v);
  static OnnxAttr of_float(std::string name, double v);
  static OnnxAttr of_ints(std::string name, std::vector<int64_t> v);
  static OnnxAttr of_string(std::string name, std::string v);
};

// Where the weights of OnnxGraph::write go when they are not inside the model file.
struct OnnxExternalData {
  std::ostream* out = nullptr;  // the data file, written from offset 0
  std::string location;         // its name as the model file refers to it (relative to the model's folder)
  uint64_t min_bytes = 1024;    // smaller initializers (constants, norms) stay inside
};

class OnnxGraph {
 public:
  using Dim = std::variant<int64_t, std::string>;  // a size, or a symbolic name ("batch")

  void input(const std::string& name, OnnxType type, std::vector<Dim> shape);
  void output(const std::string& name, OnnxType type, std::vector<Dim> shape);
  // A weight (float32, int32 or int64), made when the file is written; returns its name.
  std::string initializer(const std::string& name, LazyTensor t);
  // Small constants (names made unique).
  std::string constant(const torch::Tensor& t, const std::string& hint = "const");
  std::string scalar(float v);
  std::string ints(const std::vector<int64_t>& v);
  // A node with one output (named after the op, unique) or the given outputs; returns the first.
  std::string node(const std::string& op, const std::vector<std::string>& inputs, std::vector<OnnxAttr> attrs = {},
                   const std::string& domain = "", std::vector<std::string> outputs = {});
  size_t count(const std::string& op) const;  // nodes of that type

  // The ModelProto, streamed; `metadata` goes into metadata_props; with `external`, initializers of
  // external->min_bytes or more are streamed there instead.
  void write(std::ostream& out, const std::string& graph_name, const std::map<std::string, std::string>& metadata,
             const OnnxExternalData* external = nullptr) const;
  uint64_t initializer_bytes() const;

 private:
  struct Init {
    std::string name;
    LazyTensor data;
  };
  std::string unique(const std::string& hint);
  std::vector<std::string> nodes_, inputs_, outputs_;  // encoded NodeProto / ValueInfoProto
  std::vector<Init> inits_;
  std::map<std::string, size_t> op_counts_;
  std::map<std::string, int> used_;
};

}  // namespace hp
