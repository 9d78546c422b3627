// Runtime, threads, seeds, random state, autocast and BLAS identification (see header).
#include "headprune/util/runtime.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <ATen/autocast_mode.h>
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <torch/cuda.h>

#include "headprune/util/names.h"
#include "headprune/util/torch_compat.h"

namespace hp {

const NameTable<Precision>& precision_names() {
  static const NameTable<Precision> t{"precision",
                                      {{Precision::Float32, {"fp32", "float32"}},
                                       {Precision::BFloat16, {"bf16", "bfloat16"}},
                                       {Precision::Int8, {"int8"}}}};
  return t;
}
Precision parse_precision(const std::string& s) { return precision_names().parse(s); }

std::optional<torch::ScalarType> parse_dtype(const std::string& s) {
  if (s == "auto") return std::nullopt;
  if (s == "fp32" || s == "float32") return torch::kFloat;
  if (s == "bf16" || s == "bfloat16") return torch::kBFloat16;
  if (s == "f16" || s == "fp16" || s == "float16") return torch::kHalf;
  throw std::invalid_argument("--dtype '" + s + "': expected auto (as stored), fp32, bf16 or f16");
}

std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "fp32";
    case torch::kBFloat16: return "bf16";
    case torch::kHalf: return "f16";
    default: return c10::toString(t);
  }
}
std::string to_string(Precision p) { return precision_names().name(p); }

torch::Device parse_device(const std::string& s) {
  std::unique_ptr<torch::Device> d;
  try {
    d = std::make_unique<torch::Device>(s);
  } catch (const c10::Error&) {
    throw std::invalid_argument("unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
  }
  if (d->is_cpu()) {
    if (d->has_index() && d->index() != 0) throw std::invalid_argument("device '" + s + "': there is one CPU device");
    return torch::kCPU;
  }
  if (!d->is_cuda()) throw std::invalid_argument("unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
  if (!torch::cuda::is_available())
    throw std::invalid_argument("device '" + s +
                                "': CUDA is not available (this LibTorch was built without CUDA, or the machine has no "
                                "usable GPU); run on --device cpu, or build against a CUDA LibTorch (docs/architecture.md)");
  const auto n = static_cast<int64_t>(torch::cuda::device_count());
  if (d->has_index() && d->index() >= n)
    throw std::invalid_argument("device '" + s + "': only " + std::to_string(n) + " CUDA device(s) present");
  return torch::Device(torch::kCUDA, d->has_index() ? d->index() : 0);
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int configure_threads(int n) {
  // More threads than the machine has only make ATen's and OpenBLAS's threads wait for each other
  // (1000 threads made a 20-example evaluation 40x slower).
  if (n < 0 || n > 4 * hardware_threads())
    throw std::invalid_argument("--threads " + std::to_string(n) + ": expected 0 (all " + std::to_string(hardware_threads()) +
                                " hardware threads) up to " + std::to_string(4 * hardware_threads()));
  const int want = n > 0 ? n : hardware_threads();
  at::set_num_threads(want);
  return at::get_num_threads();
}

void seed_everything(uint64_t seed) { torch::manual_seed(seed); }  // CPU and every CUDA device

int apply_runtime(const Runtime& rt) {
  if (rt.device.is_cuda()) parse_device(rt.device.str());  // checks that it exists
  const int n = configure_threads(rt.threads);
  seed_everything(rt.seed);
  return n;
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::map<std::string, torch::Tensor> rng_state(const torch::Device& device) {
  std::map<std::string, torch::Tensor> out;
  out["rng.cpu"] = at::globalContext().defaultGenerator(torch::kCPU).get_state();
  if (device.is_cuda()) out["rng.cuda"] = at::globalContext().defaultGenerator(device).get_state();
  return out;
}

void set_rng_state(const std::map<std::string, torch::Tensor>& state, const torch::Device& device,
                   const std::string& source) {
  auto restore = [&](const std::string& key, const torch::Device& d) {
    auto it = state.find(key);
    if (it == state.end()) throw std::runtime_error(source + ": missing random state '" + key + "'");
    auto gen = at::globalContext().defaultGenerator(d);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(it->second);
  };
  restore("rng.cpu", torch::kCPU);
  if (device.is_cuda()) restore("rng.cuda", device);
}

Autocast::Autocast(const torch::Device& device, bool bf16) : on_(bf16), cuda_(device.is_cuda()) {
  if (!on_) return;
  const auto type = cuda_ ? torch::kCUDA : torch::kCPU;
  was_enabled_ = compat::autocast_enabled(type);
  was_dtype_ = compat::autocast_dtype(type);
  compat::set_autocast_enabled(type, true);
  compat::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::increment_nesting();
}

Autocast::~Autocast() {
  if (!on_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  const auto type = cuda_ ? torch::kCUDA : torch::kCPU;
  compat::set_autocast_enabled(type, was_enabled_);
  compat::set_autocast_dtype(type, was_dtype_);
}

namespace {
// What tune_allocator did: `tuned` is true only while headprune's own reuse settings are in force
// (not when the user configured malloc, nor after allocator_for_tight_memory replaced them).
struct AllocatorState {
  std::string note;
  bool tuned = false;
};
AllocatorState& allocator_state() {
  static AllocatorState state;
  return state;
}
}  // namespace

std::string tune_allocator() {
  auto set = [](const char* v) { return v != nullptr && *v != '\0'; };
  AllocatorState& a = allocator_state();
  a.tuned = false;
  if (set(std::getenv("HP_MALLOC_TUNE")) && std::string(std::getenv("HP_MALLOC_TUNE")) == "0") {
    a.note = "glibc malloc as configured (HP_MALLOC_TUNE=0)";
  } else if (set(std::getenv("MALLOC_MMAP_MAX_")) || set(std::getenv("MALLOC_TRIM_THRESHOLD_")) ||
             set(std::getenv("MALLOC_MMAP_THRESHOLD_")) || set(std::getenv("GLIBC_TUNABLES"))) {
    a.note = "glibc malloc as the user tuned it (environment)";
  } else if (::mallopt(M_MMAP_MAX, 0) == 1 && ::mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1) {
    a.note = "glibc malloc: large blocks from the heap and reused (headprune's default)";
    a.tuned = true;
  } else {
    a.note = "glibc malloc: tuning refused, defaults kept";
  }
  return a.note;
}

void allocator_for_tight_memory() {
  AllocatorState& a = allocator_state();
  if (!a.tuned) return;  // the user's settings, or the defaults, stay
  if (::mallopt(M_MMAP_MAX, 65536) == 1 && ::mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1 &&
      ::mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1) {
    a.note = "glibc malloc: blocks over 1 MiB mapped and given back when freed (weights that fill memory)";
    a.tuned = false;
  }
  ::malloc_trim(0);
}

std::string allocator_info() { return allocator_state().note; }

void trim_heap() { ::malloc_trim(0); }

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

namespace {
// The first number of a file (a /sys value), or nullopt when it is missing or not a number ("max").
std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}
}  // namespace

uint64_t available_memory_bytes(const torch::Device& device) {
  if (device.is_cuda()) return compat::device_free_bytes(device);
  uint64_t avail = 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") {
      avail = kb * 1024;
      break;
    }
  }
  if (avail == 0) avail = physical_memory_bytes();
  // A container's limit (cgroup v2, seen from inside as the root of its hierarchy).
  const auto limit = read_number("/sys/fs/cgroup/memory.max"), used = read_number("/sys/fs/cgroup/memory.current");
  if (limit && used) {
    const uint64_t left = *limit > *used ? *limit - *used : 0;
    if (avail == 0 || left < avail) avail = left;
  }
  return avail;
}

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

std::string format_gib(double bytes) {
  const double gib = bytes / static_cast<double>(1ull << 30);
  char buf[48];
  std::snprintf(buf, sizeof buf, gib < 1e5 ? "%.1f GiB" : "%.2g GiB", gib);
  return buf;
}

void check_memory(double bytes, const torch::Device& device, const std::string& what, const std::string& hint) {
  if (const char* v = std::getenv("HP_MEMORY_CHECK"); v && std::string(v) == "0") return;
  const double avail = static_cast<double>(available_memory_bytes(device));
  if (avail <= 0 || !(bytes > avail)) return;  // NaN passes: nothing to compare
  throw std::invalid_argument(what + " needs about " + format_gib(bytes) + " of memory, " + format_gib(avail) +
                              " available" + (device.is_cpu() ? "" : " on " + device.str()) + (hint.empty() ? "" : "; " + hint));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string blas_info() {
  // OpenBLAS exports these when it is the loaded BLAS (Debian's libblas.so.3 alternative).
  using StrFn = char* (*)();
  auto config = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  auto core = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  std::string s;
  if (config) {
    s = config();
    if (core) s += std::string(" core=") + core();
  } else {
    s = "unknown BLAS (not OpenBLAS)";
  }
  for (const char* var : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(var)) s += std::string(", ") + var + "=" + v;
  }
  return s;
}

}  // namespace hp
