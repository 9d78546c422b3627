// LibTorch version and CUDA differences (see header).
#include "headprune/util/torch_compat.h"

#include <optional>
#include <sstream>
#include <type_traits>
#include <stdexcept>

#include <ATen/autocast_mode.h>

#ifdef HP_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace hp::compat {

std::string torch_build() {
  std::string s = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                  std::to_string(TORCH_VERSION_PATCH);
#ifdef HP_HAVE_CUDA
  s += "+cuda";
#endif
  return s;
}

namespace {
void check_type(torch::DeviceType type) {
  if (type != torch::kCPU && type != torch::kCUDA)
    throw std::invalid_argument("autocast: only CPU and CUDA devices are supported");
}
}  // namespace

#if HP_TORCH_AT_LEAST(2, 4)
bool autocast_enabled(torch::DeviceType type) {
  check_type(type);
  return at::autocast::is_autocast_enabled(type);
}
void set_autocast_enabled(torch::DeviceType type, bool on) {
  check_type(type);
  at::autocast::set_autocast_enabled(type, on);
}
at::ScalarType autocast_dtype(torch::DeviceType type) {
  check_type(type);
  return at::autocast::get_autocast_dtype(type);
}
void set_autocast_dtype(torch::DeviceType type, at::ScalarType dtype) {
  check_type(type);
  at::autocast::set_autocast_dtype(type, dtype);
}
#else
bool autocast_enabled(torch::DeviceType type) {
  check_type(type);
  return type == torch::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_autocast_enabled(torch::DeviceType type, bool on) {
  check_type(type);
  if (type == torch::kCUDA)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
}
at::ScalarType autocast_dtype(torch::DeviceType type) {
  check_type(type);
  return type == torch::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(torch::DeviceType type, at::ScalarType dtype) {
  check_type(type);
  if (type == torch::kCUDA)
    at::autocast::set_autocast_gpu_dtype(dtype);
  else
    at::autocast::set_autocast_cpu_dtype(dtype);
}
#endif

bool has_fused_attention() { return HP_TORCH_AT_LEAST(2, 1); }

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& mask, double scale) {
#if HP_TORCH_AT_LEAST(2, 1)
  // The kernels take a boolean mask or an additive one of the queries' type.
  std::optional<torch::Tensor> m;
  if (mask.defined()) m = mask.scalar_type() == q.scalar_type() ? mask : mask.to(q.scalar_type());
  return at::scaled_dot_product_attention(q, k, v, m, 0.0, false, scale);
#else
  (void)q, (void)k, (void)v, (void)mask, (void)scale;
  return {};
#endif
}

void reset_peak_memory(const torch::Device& device) {
#ifdef HP_HAVE_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#else
  (void)device;
#endif
}

int64_t peak_memory_bytes(const torch::Device& device) {
#ifdef HP_HAVE_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[0].peak;  // 0: the aggregate over pool types
  }
#else
  (void)device;
#endif
  return 0;
}

uint64_t device_free_bytes(const torch::Device& device) {
#ifdef HP_HAVE_CUDA
  if (device.is_cuda()) {
    size_t free = 0, total = 0;
    c10::cuda::CUDAGuard guard(device.index() < 0 ? 0 : device.index());
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return free + static_cast<uint64_t>(stats.reserved_bytes[0].current - stats.allocated_bytes[0].current);
  }
#else
  (void)device;
#endif
  return 0;
}

#ifdef HP_HAVE_CUDA
struct CudaGraph::Impl {
  at::cuda::CUDAGraph graph;
  bool captured = false;
};
bool has_cuda_graphs() { return true; }
#else
struct CudaGraph::Impl {};
bool has_cuda_graphs() { return false; }
#endif

void require_cuda_graphs() {
  if (!has_cuda_graphs())
    throw std::invalid_argument("CUDA graphs need a LibTorch built with CUDA; this one (" + torch_build() +
                                ") runs on the CPU only");
}

CudaGraph::CudaGraph() : impl_(std::make_unique<Impl>()) {}
CudaGraph::~CudaGraph() = default;

void CudaGraph::capture(const std::function<void()>& fn, const torch::Device& device, int warmup) {
#ifdef HP_HAVE_CUDA
  if (!device.is_cuda()) throw std::invalid_argument("CUDA graphs record work on a CUDA device, not " + device.str());
  if (impl_->captured) throw std::logic_error("CudaGraph::capture: already captured");
  c10::cuda::CUDAGuard guard(device.index() < 0 ? 0 : device.index());
  // Recording needs a stream other than the default one; the side stream waits for the work queued
  // so far, and the current stream waits for the side stream at the end.
  const auto current = c10::cuda::getCurrentCUDAStream();
  const auto side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAEvent queued;
  queued.record(current);
  queued.block(side);
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < warmup; ++i) fn();
    impl_->graph.capture_begin();
    try {
      fn();
    } catch (const std::exception& e) {
      try {
        impl_->graph.capture_end();  // leaves capture mode; throws for the invalidated capture
      } catch (const std::exception&) {
      }
      throw std::runtime_error(std::string("CUDA graph capture failed (the forward pass synchronised with the host "
                                           "or launched work the recording cannot hold): ") + e.what());
    }
    impl_->graph.capture_end();
  }
  at::cuda::CUDAEvent recorded;
  recorded.record(side);
  recorded.block(current);
  impl_->captured = true;
#else
  (void)fn, (void)device, (void)warmup;
  require_cuda_graphs();  // throws: this build has none
#endif
}

void CudaGraph::replay() {
#ifdef HP_HAVE_CUDA
  if (!impl_->captured) throw std::logic_error("CudaGraph::replay: nothing captured");
  impl_->graph.replay();
#else
  throw std::logic_error("CudaGraph::replay: this build has no CUDA");
#endif
}

namespace {
// The key of a parameter's entry in an optimizer's state map (see the header).
template <typename Map>
typename Map::key_type state_key(const Map&, const torch::Tensor& param) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << param.unsafeGetTensorImpl();
    return os.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

torch::Tensor copy_of(const torch::Tensor& t) { return t.defined() ? t.detach().clone() : t; }
}  // namespace

AdamMoments adam_moments(const torch::optim::Adam& opt, const torch::Tensor& param) {
  const auto& state = opt.state();
  const auto it = state.find(state_key(state, param));
  if (it == state.end()) return {};
  const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
  return {s.step(), copy_of(s.exp_avg()), copy_of(s.exp_avg_sq()), copy_of(s.max_exp_avg_sq())};
}

void set_adam_moments(torch::optim::Adam& opt, const torch::Tensor& param, const AdamMoments& m) {
  auto& state = opt.state();
  const auto key = state_key(state, param);
  if (!m.exp_avg.defined()) {
    state.erase(key);
    return;
  }
  auto s = std::make_unique<torch::optim::AdamParamState>();
  s->step(m.step);
  s->exp_avg(copy_of(m.exp_avg));
  s->exp_avg_sq(copy_of(m.exp_avg_sq));
  s->max_exp_avg_sq(copy_of(m.max_exp_avg_sq));
  state[key] = std::move(s);
}

}  // namespace hp::compat
