// Fixed-shape replay of a function of tensors: one recording per set of input shapes, launched again
// for every later call at those shapes. On a GPU this is a CUDA graph (util/torch_compat.h's
// CudaGraph), which turns the hundreds of kernel launches of a forward pass into one call: the cure
// for a small batch that is launch-bound. The function reads its inputs from tensors the recording
// owns (the static inputs; each call copies its inputs into them) and writes its outputs into tensors
// the recording owns (the static outputs, returned by reference).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace hp {

// Off: fn is called directly. Cuda: CUDA graphs (inputs on a CUDA device, a LibTorch built with CUDA).
// Emulate: the static inputs and outputs of a recording, without one: every call copies its inputs
// into the shape's static inputs, runs fn on them and copies its results into the shape's static
// outputs, as a replay does; on any device. It exists to test the code around the graphs on a machine
// without a GPU.
enum class GraphReplay { Off, Cuda, Emulate };
const char* graph_replay_name(GraphReplay mode);  // "off", "cuda", "emulate"
GraphReplay parse_graph_replay(const std::string& s);  // the names above; anything else throws, naming them

class ShapeGraphs {
 public:
  using Fn = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;
  // fn must return tensors of the same shapes for inputs of the same shapes (a forward pass does), and
  // must not synchronise with the host (CudaGraph). warmup: eager calls before a CUDA recording.
  ShapeGraphs(Fn fn, GraphReplay mode, int warmup = 2);
  ~ShapeGraphs();
  ShapeGraphs(const ShapeGraphs&) = delete;
  ShapeGraphs& operator=(const ShapeGraphs&) = delete;

  // fn(inputs): the first call at a new set of shapes, dtypes and devices records (Cuda) or sets up
  // (Emulate) that shape; every call replays it. Undefined inputs stay undefined. The returned tensors
  // are the shape's static outputs: the next call at the same shapes overwrites them (clone to keep).
  const std::vector<torch::Tensor>& operator()(const std::vector<torch::Tensor>& inputs);

  size_t recorded() const { return shapes_.size(); }  // shapes set up so far (0 with Off)

 private:
  struct Shape;
  Fn fn_;
  GraphReplay mode_;
  int warmup_;
  std::map<std::string, std::unique_ptr<Shape>> shapes_;
  std::vector<torch::Tensor> direct_;  // Off: the last results
};

}  // namespace hp
