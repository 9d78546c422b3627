// The LibTorch API differences between the versions headprune builds against: Debian's 1.13 (CPU
// only) and PyTorch's 2.x (CPU and CUDA). Every version- or CUDA-dependent call lives behind this
// header (src/util/torch_compat.cc); the rest of the code calls these and compiles against both.
//
// HP_TORCH_AT_LEAST(2, 1): the LibTorch in use is 2.1 or later. HP_HAVE_CUDA (set by CMake when the
// LibTorch it found was built with CUDA) turns on the CUDA-only parts (memory statistics).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/torch.h>
#include <torch/version.h>

#define HP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace hp::compat {

// "1.13.0", "2.11.0" ...: the LibTorch headers compiled against; "+cuda" when built with CUDA.
std::string torch_build();

// Autocast state of one device type (CPU or CUDA). 1.13 names these per device (is_cpu_enabled,
// set_autocast_gpu_dtype ...); 2.4 and later take the device type and deprecate the old names.
bool autocast_enabled(torch::DeviceType type);
void set_autocast_enabled(torch::DeviceType type, bool on);
at::ScalarType autocast_dtype(torch::DeviceType type);
void set_autocast_dtype(torch::DeviceType type, at::ScalarType dtype);

// softmax(q k^T * scale + mask) v by LibTorch's fused scaled-dot-product attention (flash or
// memory-efficient kernels on CUDA, a fused kernel on CPU) where the build has it (2.1 and later);
// an undefined tensor where it has not, and the caller computes it step by step. q [B, H, T, D],
// k and v [B, H, S, D]; mask additive, broadcastable to [B, H, T, S], or undefined. Inference only:
// no dropout, no attention maps.
bool has_fused_attention();
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& mask, double scale);

// The Adam state of one parameter (step count and moments), copied out of and back into a
// torch::optim::Adam, e.g. to roll an optimizer back with the tensor it updates. 1.13 keys its
// state by the parameter's TensorImpl address printed as a string, 2.x by the address itself. An
// undefined exp_avg stands for no state yet (no step taken); setting it clears the state.
struct AdamMoments {
  int64_t step = 0;
  torch::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
};
AdamMoments adam_moments(const torch::optim::Adam& opt, const torch::Tensor& param);
void set_adam_moments(torch::optim::Adam& opt, const torch::Tensor& param, const AdamMoments& m);

// GPU memory, for benchmarks: the peak of memory allocated by tensors on a CUDA device since the
// last reset, in bytes. 0 on the CPU and in builds without CUDA.
void reset_peak_memory(const torch::Device& device);
int64_t peak_memory_bytes(const torch::Device& device);
// Free memory of a GPU plus what this process's caching allocator holds unused (0 without CUDA).
uint64_t device_free_bytes(const torch::Device& device);

// CUDA graphs (builds with CUDA): the kernels `fn` launches on a GPU, recorded once and launched
// again by one call. capture() runs fn `warmup` times on a side stream (lazy initialisation, cuBLAS
// workspaces and caches happen outside the recording), then records one more run of it into the
// graph, with its memory from a pool of the graph's own; replay() launches the recorded kernels on
// the current stream, on the same memory: fn's inputs and outputs are the tensors it used while
// recorded. fn must not synchronise with the host while recorded (.item(), a copy to the CPU):
// capture() then throws, naming the error. Without CUDA, has_cuda_graphs() is false and capture()
// throws.
bool has_cuda_graphs();
void require_cuda_graphs();  // throws, saying why, when !has_cuda_graphs()
class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  void capture(const std::function<void()>& fn, const torch::Device& device, int warmup);
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::compat
