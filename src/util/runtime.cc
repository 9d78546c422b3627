// Threads, seeds and BLAS identification.
#include "headprune/util/runtime.h"

#include <cstdlib>
#include <thread>

#include <dlfcn.h>
#include <torch/torch.h>

namespace hp {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int configure_threads(int n) {
  const int want = n > 0 ? n : hardware_threads();
  at::set_num_threads(want);
  return at::get_num_threads();
}

void seed_everything(uint64_t seed) { torch::manual_seed(seed); }

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
