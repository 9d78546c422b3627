// ONNX graph builder and streamed ModelProto writer (see header).
#include "headprune/io/onnx.h"

#include <ostream>
#include <stdexcept>

#include "headprune/util/protowire.h"
#include "headprune/version.h"

namespace hp {

namespace {

// onnx.proto field numbers.
enum : uint32_t {
  kModelIrVersion = 1, kModelProducer = 2, kModelProducerVersion = 3, kModelGraph = 7, kModelOpset = 8,
  kModelMetadata = 14,
  kOpsetDomain = 1, kOpsetVersion = 2,
  kGraphNode = 1, kGraphName = 2, kGraphInitializer = 5, kGraphInput = 11, kGraphOutput = 12,
  kNodeInput = 1, kNodeOutput = 2, kNodeName = 3, kNodeOp = 4, kNodeAttribute = 5, kNodeDomain = 7,
  kAttrName = 1, kAttrF = 2, kAttrI = 3, kAttrS = 4, kAttrFloats = 7, kAttrInts = 8, kAttrType = 20,
  kTensorDims = 1, kTensorType = 2, kTensorName = 8, kTensorRaw = 9, kTensorExternal = 13, kTensorLocation = 14,
  kValueName = 1, kValueType = 2, kTypeTensor = 1, kTensorElem = 1, kTensorShape = 2, kShapeDim = 1,
  kDimValue = 1, kDimParam = 2,
  kEntryKey = 1, kEntryValue = 2,
};

constexpr uint64_t kProtobufLimit = (1ull << 31) - 1;

OnnxType onnx_type_of(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return OnnxType::Float;
    case torch::kInt32: return OnnxType::Int32;
    case torch::kInt64: return OnnxType::Int64;
    default: throw std::invalid_argument(std::string("ONNX: initializers of dtype ") + c10::toString(t) + " are not written");
  }
}

std::string value_info(const std::string& name, OnnxType type, const std::vector<OnnxGraph::Dim>& shape) {
  ProtoWriter s;
  for (const auto& d : shape) {
    ProtoWriter dim;
    if (std::holds_alternative<int64_t>(d))
      dim.int_value(kDimValue, std::get<int64_t>(d));
    else
      dim.bytes(kDimParam, std::get<std::string>(d));
    s.message(kShapeDim, dim);
  }
  ProtoWriter tensor, type_proto, v;
  tensor.int_value(kTensorElem, static_cast<int64_t>(type));
  tensor.message(kTensorShape, s);
  type_proto.message(kTypeTensor, tensor);
  v.bytes(kValueName, name);
  v.message(kValueType, type_proto);
  return v.data();
}

// A TensorProto without its raw_data field.
std::string tensor_head(const std::string& name, const LazyTensor& t) {
  ProtoWriter w;
  for (int64_t d : t.shape) w.int_value(kTensorDims, d);
  w.int_value(kTensorType, static_cast<int64_t>(onnx_type_of(t.dtype)));
  w.bytes(kTensorName, name);
  return w.data();
}

uint64_t field_size(uint64_t length) { return 1 + ProtoWriter::varint_size(length) + length; }  // field < 16

}  // namespace

OnnxAttr OnnxAttr::of(std::string name, int64_t v) {
  OnnxAttr a;
  a.name = std::move(name), a.kind = Kind::Int, a.i = v;
  return a;
}
OnnxAttr OnnxAttr::of_float(std::string name, double v) {
  OnnxAttr a;
  a.name = std::move(name), a.kind = Kind::Float, a.f = v;
  return a;
}
OnnxAttr OnnxAttr::of_ints(std::string name, std::vector<int64_t> v) {
  OnnxAttr a;
  a.name = std::move(name), a.kind = Kind::Ints, a.ints = std::move(v);
  return a;
}
OnnxAttr OnnxAttr::of_string(std::string name, std::string v) {
  OnnxAttr a;
  a.name = std::move(name), a.kind = Kind::String, a.s = std::move(v);
  return a;
}

std::string OnnxGraph::unique(const std::string& hint) {
  const int n = used_[hint]++;
  return n == 0 ? hint : hint + "_" + std::to_string(n);
}

void OnnxGraph::input(const std::string& name, OnnxType type, std::vector<Dim> shape) {
  inputs_.push_back(value_info(name, type, shape));
  used_[name]++;
}

void OnnxGraph::output(const std::string& name, OnnxType type, std::vector<Dim> shape) {
  outputs_.push_back(value_info(name, type, shape));
}

std::string OnnxGraph::initializer(const std::string& name, LazyTensor t) {
  onnx_type_of(t.dtype);
  const std::string n = unique(name);
  inits_.push_back({n, std::move(t)});
  return n;
}

std::string OnnxGraph::constant(const torch::Tensor& t, const std::string& hint) {
  return initializer(hint, LazyTensor::of(t.contiguous()));
}

std::string OnnxGraph::scalar(float v) { return constant(torch::tensor(v), "scalar"); }

std::string OnnxGraph::ints(const std::vector<int64_t>& v) {
  return constant(torch::tensor(v, torch::TensorOptions().dtype(torch::kInt64)), "ints");
}

std::string OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs, std::vector<OnnxAttr> attrs,
                            const std::string& domain, std::vector<std::string> outputs) {
  if (outputs.empty()) outputs.push_back(unique(op));
  ProtoWriter n;
  for (const auto& i : inputs) n.bytes(kNodeInput, i);
  for (const auto& o : outputs) n.bytes(kNodeOutput, o);
  n.bytes(kNodeName, "node_" + outputs[0]);
  n.bytes(kNodeOp, op);
  for (const auto& a : attrs) {
    ProtoWriter w;
    w.bytes(kAttrName, a.name);
    switch (a.kind) {
      case OnnxAttr::Kind::Float: w.float32(kAttrF, static_cast<float>(a.f)); break;
      case OnnxAttr::Kind::Int: w.int_value(kAttrI, a.i); break;
      case OnnxAttr::Kind::String: w.bytes(kAttrS, a.s); break;
      case OnnxAttr::Kind::Ints: for (int64_t v : a.ints) w.int_value(kAttrInts, v); break;
      case OnnxAttr::Kind::Floats: for (double v : a.floats) w.float32(kAttrFloats, static_cast<float>(v)); break;
    }
    w.int_value(kAttrType, static_cast<int64_t>(a.kind));
    n.message(kNodeAttribute, w);
  }
  if (!domain.empty()) n.bytes(kNodeDomain, domain);
  nodes_.push_back(n.data());
  op_counts_[op]++;
  return outputs[0];
}

size_t OnnxGraph::count(const std::string& op) const {
  const auto it = op_counts_.find(op);
  return it == op_counts_.end() ? 0 : it->second;
}

uint64_t OnnxGraph::initializer_bytes() const {
  uint64_t n = 0;
  for (const auto& i : inits_) n += i.data.nbytes();
  return n;
}

void OnnxGraph::write(std::ostream& out, const std::string& graph_name, const std::map<std::string, std::string>& metadata,
                      const OnnxExternalData* external) const {
  // The graph's length first (the initializers' bytes are known from their shapes), then everything streamed.
  ProtoWriter small;  // the graph's fields other than the initializers
  small.bytes(kGraphName, graph_name);
  for (const auto& n : nodes_) small.bytes(kGraphNode, n);
  for (const auto& i : inputs_) small.bytes(kGraphInput, i);
  for (const auto& o : outputs_) small.bytes(kGraphOutput, o);
  std::vector<std::string> heads;
  std::vector<bool> outside;  // the initializer's bytes go to the external data file
  uint64_t graph = small.data().size(), offset = 0;
  for (const auto& i : inits_) {
    heads.push_back(tensor_head(i.name, i.data));
    const uint64_t raw = i.data.nbytes();
    outside.push_back(external && raw >= external->min_bytes);
    if (outside.back()) {  // where its bytes are: location, offset (page-aligned, for mapping) and length
      ProtoWriter h;  // appended to the head: a message is its fields in any order
      for (const auto& [k, v] : {std::pair<const char*, std::string>{"location", external->location},
                                 {"offset", std::to_string(offset)}, {"length", std::to_string(raw)}}) {
        ProtoWriter e;
        e.bytes(kEntryKey, k);
        e.bytes(kEntryValue, v);
        h.message(kTensorExternal, e);
      }
      h.int_value(kTensorLocation, 1);  // EXTERNAL
      heads.back() += h.data();
      offset = (offset + raw + 4095) / 4096 * 4096;
      graph += field_size(heads.back().size());
    } else {
      graph += field_size(heads.back().size() + field_size(raw));
    }
  }
  ProtoWriter model;
  model.int_value(kModelIrVersion, 8);
  model.bytes(kModelProducer, "headprune");
  model.bytes(kModelProducerVersion, HP_VERSION_STRING);
  for (const auto& [domain, version] : {std::pair<const char*, int64_t>{"", 17}, {"com.microsoft", 1}}) {
    ProtoWriter o;
    if (*domain) o.bytes(kOpsetDomain, domain);
    o.int_value(kOpsetVersion, version);
    model.message(kModelOpset, o);
  }
  for (const auto& [k, v] : metadata) {
    ProtoWriter e;
    e.bytes(kEntryKey, k);
    e.bytes(kEntryValue, v);
    model.message(kModelMetadata, e);
  }
  const uint64_t total = model.data().size() + field_size(graph);
  if (total > kProtobufLimit)
    throw std::invalid_argument("ONNX export: the model takes " + std::to_string(total) +
                                " bytes, more than the 2 GiB a protobuf message can hold: write its weights as "
                                "external data (--onnx-external-data)");
  out << model.data() << ProtoWriter::header(kModelGraph, graph) << small.data();
  uint64_t written = 0;
  for (size_t k = 0; k < inits_.size(); ++k) {
    const auto& i = inits_[k];
    const uint64_t raw = i.data.nbytes();
    if (outside[k]) {
      out << ProtoWriter::header(kGraphInitializer, heads[k].size()) << heads[k];
      i.data.write_to(*external->out, i.name);
      const uint64_t end = (written + raw + 4095) / 4096 * 4096;
      *external->out << std::string(end - written - raw, '\0');
      written = end;
      continue;
    }
    out << ProtoWriter::header(kGraphInitializer, heads[k].size() + field_size(raw)) << heads[k]
        << ProtoWriter::header(kTensorRaw, raw);
    i.data.write_to(out, i.name);
  }
}

}  // namespace hp
