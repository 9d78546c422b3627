// Fixed-shape replay of a function of tensors (see header).
#include "headprune/util/shape_graphs.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "headprune/util/torch_compat.h"

namespace hp {

const char* graph_replay_name(GraphReplay mode) {
  switch (mode) {
    case GraphReplay::Off:
      return "off";
    case GraphReplay::Cuda:
      return "cuda";
    case GraphReplay::Emulate:
      return "emulate";
  }
  return "?";
}

GraphReplay parse_graph_replay(const std::string& s) {
  for (auto m : {GraphReplay::Off, GraphReplay::Cuda, GraphReplay::Emulate})
    if (s == graph_replay_name(m)) return m;
  throw std::invalid_argument("graph replay '" + s + "': expected off, cuda or emulate");
}

struct ShapeGraphs::Shape {
  std::vector<torch::Tensor> in, out;
  compat::CudaGraph graph;  // Cuda only
};

namespace {
// What a recording is specific to: every input's presence, dtype, device and sizes.
std::string shape_key(const std::vector<torch::Tensor>& inputs) {
  std::ostringstream os;
  for (const auto& t : inputs) {
    if (!t.defined()) {
      os << "-;";
      continue;
    }
    os << c10::toString(t.scalar_type()) << '@' << t.device() << t.sizes() << ';';
  }
  return os.str();
}
}  // namespace

ShapeGraphs::ShapeGraphs(Fn fn, GraphReplay mode, int warmup) : fn_(std::move(fn)), mode_(mode), warmup_(warmup) {
  if (warmup < 0) throw std::invalid_argument("ShapeGraphs: warmup must be >= 0");
  if (mode == GraphReplay::Cuda) compat::require_cuda_graphs();
}

ShapeGraphs::~ShapeGraphs() = default;

const std::vector<torch::Tensor>& ShapeGraphs::operator()(const std::vector<torch::Tensor>& inputs) {
  if (mode_ == GraphReplay::Off) {
    direct_ = fn_(inputs);
    return direct_;
  }
  const std::string key = shape_key(inputs);
  auto it = shapes_.find(key);
  const bool fresh = it == shapes_.end();
  if (fresh) {
    auto s = std::make_unique<Shape>();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& t = inputs[i];
      if (mode_ == GraphReplay::Cuda && t.defined() && !t.is_cuda())
        throw std::invalid_argument("CUDA graphs replay work on a CUDA device; input " + std::to_string(i) +
                                    " is on " + t.device().str());
      s->in.push_back(t.defined() ? t.clone() : t);
    }
    if (mode_ == GraphReplay::Cuda) {
      const auto first = std::find_if(inputs.begin(), inputs.end(), [](const torch::Tensor& t) { return t.defined(); });
      if (first == inputs.end()) throw std::invalid_argument("CUDA graphs: no input tensor to replay on");
      Shape* raw = s.get();
      raw->graph.capture([this, raw] { raw->out = fn_(raw->in); }, first->device(), warmup_);
    } else {
      s->out = fn_(s->in);
      for (auto& t : s->out)
        if (t.defined()) t = t.clone();  // the outputs' own memory, as a recording's pool holds them
    }
    it = shapes_.emplace(key, std::move(s)).first;
  }
  Shape& s = *it->second;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) s.in[i].copy_(inputs[i]);
  if (mode_ == GraphReplay::Cuda) {
    s.graph.replay();
    return s.out;
  }
  if (fresh) return s.out;  // already computed on these inputs
  const auto r = fn_(s.in);
  if (r.size() != s.out.size()) throw std::logic_error("ShapeGraphs: the function returned another number of tensors");
  for (size_t i = 0; i < r.size(); ++i) {
    if (!r[i].defined()) continue;
    if (r[i].sizes() != s.out[i].sizes())
      throw std::logic_error("ShapeGraphs: the function's output " + std::to_string(i) +
                             " changed shape for inputs of the same shapes");
    s.out[i].copy_(r[i]);
  }
  return s.out;
}

}  // namespace hp
