// Where and how tensors are computed: the Runtime (device, precision, threads, seed) that the
// command line fills once and every job reads; process-wide settings (threads, seeds); random-number
// state for exact resume; mixed-precision (autocast) scopes; device synchronisation for timing; and a
// description of the math libraries in use (benchmark records must state them to be comparable).
//
// Library functions follow the device of the model they are given (its parameters): tensors they
// create go there, batches are moved there, and results are read back to the host once, not per
// element or per batch. The Runtime's device decides where models are loaded or built.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <torch/torch.h>

namespace hp {

template <typename E>
class NameTable;

// Numeric format of inference (eval, bench): fp32 as trained; bf16 (every parameter and activation
// in bfloat16); int8 (dynamic int8 linear layers). Training with bf16 runs under autocast instead
// (fp32 master weights; run configs' "bf16").
enum class Precision { Float32, BFloat16, Int8 };
Precision parse_precision(const std::string& s);  // "fp32", "bf16", "int8"
// "auto" (unset: as stored), "fp32", "bf16", "f16"; anything else is std::invalid_argument.
std::optional<torch::ScalarType> parse_dtype(const std::string& s);
std::string dtype_name(torch::ScalarType t);  // "fp32", "bf16", "f16", else LibTorch's name
std::string to_string(Precision p);
const NameTable<Precision>& precision_names();

struct Runtime {
  torch::Device device = torch::kCPU;
  Precision precision = Precision::Float32;
  // The weights' dtype as loaded (--dtype): unset keeps what the files store (a bf16 checkpoint stays
  // bf16 and is computed in bf16, norms and softmax statistics in fp32); fp32, bf16 or f16 converts.
  std::optional<torch::ScalarType> dtype;
  int threads = 0;  // ATen intra-op threads; 0 = all cores
  uint64_t seed = 1234;
};

// "cpu", "cuda" or "cuda:N". A CUDA device in a LibTorch built without CUDA, on a machine without
// a GPU, or with an index beyond the GPUs present is std::invalid_argument saying which.
torch::Device parse_device(const std::string& s);
// Applies threads and seeds (CPU and, when present, CUDA generators) process-wide and checks the
// device; returns the number of threads in effect.
int apply_runtime(const Runtime& rt);

// Sets ATen's intra-op threads; n <= 0 means all cores. Returns the count in effect.
int configure_threads(int n);
int hardware_threads();
void seed_everything(uint64_t seed);

// Waits until the device has finished the work queued so far (a no-op on the CPU, where every
// operation has finished when it returns). Benchmarks call it before reading the clock.
void synchronize(const torch::Device& device);

// The state of the default random generators that training draws from (dropout, Hard Concrete
// samples): the CPU's ("rng.cpu") and, for a CUDA device, that device's ("rng.cuda"). Saved with
// resume checkpoints so that a resumed run draws the same numbers.
std::map<std::string, torch::Tensor> rng_state(const torch::Device& device);
// Restores a state from rng_state; a missing entry is std::runtime_error naming `source`.
void set_rng_state(const std::map<std::string, torch::Tensor>& state, const torch::Device& device,
                   const std::string& source);

// Mixed precision for its scope: matrix products in bfloat16 on `device` (reductions and norms stay
// in fp32), nothing when bf16 is false. Scopes may nest.
class Autocast {
 public:
  Autocast(const torch::Device& device, bool bf16);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_ = false, cuda_ = false, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// e.g. "OpenBLAS 0.3.21 (OpenMP) core=Haswell, OPENBLAS_CORETYPE=Haswell"
std::string blas_info();
// The CPU's model name from /proc/cpuinfo ("unknown" where there is none).
std::string cpu_model();
// Physical memory in bytes (0 when unknown): the bound a model's parameters are checked against
// before they are allocated.
uint64_t physical_memory_bytes();
// What a job may still use, in bytes: on the CPU, MemAvailable of /proc/meminfo (free memory plus what
// the page cache can give back), lowered to what a cgroup v2 memory limit (/sys/fs/cgroup/memory.max)
// leaves, physical memory where the kernel does not report it; on a GPU, its free memory plus this
// process's cached blocks. 0 when unknown.
uint64_t available_memory_bytes(const torch::Device& device = torch::kCPU);
// Peak resident set of this process so far (VmHWM), in bytes; 0 when unknown.
uint64_t peak_rss_bytes();
// "3.2 GiB" (short at any size: "1.5e+07 GiB").
std::string format_gib(double bytes);
// Refuses work whose estimated memory on `device` is more than is available, before anything is
// allocated: std::invalid_argument "WHAT needs about X GiB of memory, Y GiB available; HINT" (nothing
// when that is unknown, or with HP_MEMORY_CHECK=0). Estimates are meant as lower bounds, so nothing
// that would fit is refused.
void check_memory(double bytes, const torch::Device& device, const std::string& what, const std::string& hint);

// glibc maps every allocation above its mmap ceiling (32 MiB) afresh and unmaps it when freed, so a
// large activation pays its page faults again on every forward pass: BERT-base at batch 64 x 128 ran
// 2.8x slower that way. Call once at start-up (headprune's main does): large blocks then come from
// the heap and are reused (mallopt M_MMAP_MAX 0, no trimming). Nothing happens when the user tuned
// malloc themselves (MALLOC_MMAP_MAX_, MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_ or
// GLIBC_TUNABLES) or set HP_MALLOC_TUNE=0. Returns what it did, for logs and benchmark records.
std::string tune_allocator();
// For a job whose weights fill memory (layer-by-layer scoring of a large model): undoes
// tune_allocator's heap reuse, so blocks over 1 MiB are mapped and given back when freed and the free
// heap is returned now. A 7B model's scoring peaked 0.87 GiB lower this way (15.61 -> 14.74 GiB, 20 %
// slower). Nothing happens when tune_allocator did not tune (the user's settings stay).
void allocator_for_tight_memory();
// What tune_allocator() did in this process ("" before it ran).
std::string allocator_info();
// Gives the heap's free memory back to the system now (glibc's malloc_trim): after a job drops a large
// model, before it loads another, so the two do not add up in memory.
void trim_heap();

}  // namespace hp
