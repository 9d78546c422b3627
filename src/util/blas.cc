// OpenBLAS kernel inspection and selection (see header).
#include "headprune/util/blas.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

namespace hp {

namespace {

// Instruction-set level of OpenBLAS 0.3.21's x86-64 kernel sets (DYNAMIC_ARCH core names).
int core_level(const std::string& core) {
  static const std::map<std::string, int> levels = {
      {"Prescott", 1},   {"Core2", 1},      {"Penryn", 1},     {"Dunnington", 1}, {"Nehalem", 1},
      {"Atom", 1},       {"Opteron", 1},    {"Opteron_SSE3", 1}, {"Barcelona", 1}, {"Bobcat", 1},
      {"Nano", 1},       {"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2}, {"Steamroller", 2},
      {"Excavator", 2},  {"Haswell", 3},    {"Zen", 3},        {"SkylakeX", 4},   {"Cooperlake", 4},
      {"SapphireRapids", 4}};
  const auto it = levels.find(core);
  return it == levels.end() ? 0 : it->second;
}

const char* level_name(int level) {
  switch (level) {
    case 1: return "sse3";
    case 2: return "avx";
    case 3: return "avx2";
    case 4: return "avx512";
  }
  return "unknown";
}

int level_of_name(const std::string& name) {
  for (int l = 1; l <= 4; ++l)
    if (name == level_name(l)) return l;
  return 0;
}

// The best kernel set of each level, by measurement (docs/benchmarks.md, "BLAS kernels").
const char* best_core(int level) {
  switch (level) {
    case 2: return "Sandybridge";
    case 3: return "Haswell";
    case 4: return "SkylakeX";
  }
  return "";
}

int cpu_level() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // libgcc checks that the OS saves the wider registers too (XCR0), not only the CPUID bits.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return 4;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 3;
  if (__builtin_cpu_supports("avx")) return 2;
  if (__builtin_cpu_supports("sse3")) return 1;
#endif
  return 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string recommended_blas_core(const std::string& loaded, const std::string& cpu) {
  const int have = core_level(loaded), can = level_of_name(cpu);
  if (have == 0 || can == 0 || have >= can) return "";
  return best_core(can);
}

BlasKernels inspect_blas_kernels() {
  BlasKernels k;
  using StrFn = char* (*)();
  auto core = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  k.cpu_level = level_name(cpu_level());
  const std::string var = env("OPENBLAS_CORETYPE"), chosen_to = env("HP_BLAS_CHOSEN_TO");
  if (!var.empty() && var == chosen_to) {
    k.chosen_from = env("HP_BLAS_CHOSEN_FROM");
  } else if (env("HP_BLAS_TREAT_AS_DETECTED") != "1") {
    // (HP_BLAS_TREAT_AS_DETECTED=1, for tests only: a preset OPENBLAS_CORETYPE stands for OpenBLAS's
    // own detection, so that the restart can be tested on any CPU.)
    k.user_setting = var;
  }
  if (!core) {
    k.reason = "the loaded BLAS is not OpenBLAS; its kernels are its own choice";
    return k;
  }
  k.openblas = true;
  k.loaded = core();
  const std::string better = recommended_blas_core(k.loaded, k.cpu_level);
  k.recommended = better.empty() ? k.loaded : better;
  if (!k.user_setting.empty()) {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels: OPENBLAS_CORETYPE=" + k.user_setting + " was set by the user";
  } else if (!k.chosen_from.empty()) {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels, chosen by headprune: OpenBLAS picked " + k.chosen_from +
               " on this CPU (" + k.cpu_level + "; set OPENBLAS_CORETYPE to choose yourself)";
  } else if (better.empty()) {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels, its own choice for this CPU (" + k.cpu_level + ")";
  } else {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels on a CPU with " + k.cpu_level + "; " + better +
               " would be faster (set OPENBLAS_CORETYPE=" + better + ", or call use_best_blas_kernels first in main)";
  }
  return k;
}

bool choose_blas_kernels() {
  if (env("HP_BLAS_AUTO") == "0") return false;
  const BlasKernels k = inspect_blas_kernels();
  if (!k.should_switch()) return false;
  if (::setenv("OPENBLAS_CORETYPE", k.recommended.c_str(), 1) == 0 &&
      ::setenv("HP_BLAS_CHOSEN_TO", k.recommended.c_str(), 1) == 0 &&
      ::setenv("HP_BLAS_CHOSEN_FROM", k.loaded.c_str(), 1) == 0)
    return true;
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("HP_BLAS_CHOSEN_TO");
  ::unsetenv("HP_BLAS_CHOSEN_FROM");
  return false;
}

void use_best_blas_kernels(char** argv) {
  if (!choose_blas_kernels()) return;
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): go on with the kernels we have, and do not pretend otherwise.
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("HP_BLAS_CHOSEN_TO");
  ::unsetenv("HP_BLAS_CHOSEN_FROM");
}

}  // namespace hp
