// Which OpenBLAS kernels run, and choosing better ones at start-up.
//
// Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernel set ("core") when it is loaded, from the
// CPU it recognises, or from OPENBLAS_CORETYPE. A CPU newer than the library is not recognised and
// gets a generic set: on a 2-core Intel Xeon with AVX-512 (family 6, model 207) that is Prescott
// (SSE3), a fifth of the machine's GEMM speed. The variable is read only once, when the library
// loads, which happens before main() of any program linked with LibTorch; so a program that wants
// other kernels has to start again with the variable set. The `headprune` command is therefore a small
// launcher (cli/start.cc) that links no LibTorch: it loads OpenBLAS alone, sets the variable with
// choose_blas_kernels() and starts the program (headprune-core) once. use_best_blas_kernels() is the
// fallback for a program started directly: it restarts itself. The Python module, which can do neither,
// makes the choice in a child process when it is imported before torch (blas_choice_for_later_load).
//
// A user's own OPENBLAS_CORETYPE always wins: nothing here changes it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hp {

struct BlasKernels {
  bool openblas = false;     // the loaded BLAS is OpenBLAS (otherwise nothing below applies)
  std::string loaded;        // the core OpenBLAS runs now, e.g. "Prescott", "Haswell", "SkylakeX"
  std::string cpu_level;     // the best instruction set the CPU and kernel support: sse3, avx, avx2, avx512
  std::string recommended;   // the kernel set to run: `loaded` unless a better one exists for this CPU
  std::string user_setting;  // OPENBLAS_CORETYPE as the user set it ("" when unset or set by headprune)
  std::string chosen_from;   // set when headprune restarted the program: the core OpenBLAS had picked
  std::string reason;        // one sentence: what runs and why
  bool should_switch() const { return openblas && user_setting.empty() && chosen_from.empty() && recommended != loaded; }
};

// Inspects the loaded OpenBLAS, the environment and the CPU. Cheap; no side effects.
BlasKernels inspect_blas_kernels();

// The kernel set this rule recommends for a loaded core on a CPU of a given level ("" = keep it):
// a core below the CPU's level is replaced by the best set of that level (avx512 -> SkylakeX,
// avx2 -> Haswell, avx -> Sandybridge); a core at the CPU's level is kept. Exposed for tests.
std::string recommended_blas_core(const std::string& loaded, const std::string& cpu_level);

// When OPENBLAS_CORETYPE is unset, HP_BLAS_AUTO is not 0 and the loaded OpenBLAS runs kernels below
// what the CPU supports: sets OPENBLAS_CORETYPE to the recommended set (and HP_BLAS_CHOSEN_TO and
// HP_BLAS_CHOSEN_FROM, so the program started next reports the choice) and returns true. Otherwise
// changes nothing and returns false. A program started after it, with this environment, loads
// OpenBLAS with the better kernels.
bool choose_blas_kernels();

// Call first thing in main(), before any thread starts. When OPENBLAS_CORETYPE is unset and OpenBLAS
// runs kernels below what the CPU supports, sets OPENBLAS_CORETYPE to the recommended set (and
// HP_BLAS_CHOSEN_FROM to the core it replaces) and re-executes the program with the same arguments,
// so OpenBLAS loads with the better kernels. Returns when there is nothing to do, when HP_BLAS_AUTO=0,
// or when the re-execution fails (the program then goes on with the kernels it has).
void use_best_blas_kernels(char** argv);

// For a process that cannot restart and has not loaded OpenBLAS yet (a Python session before torch is
// imported): loads OpenBLAS in a short-lived child process (fork), makes choose_blas_kernels()'s choice
// there and returns the variables it set, name and value, for the caller to set before OpenBLAS loads.
// Empty when there is nothing to choose, when HP_BLAS_AUTO=0, when this process has loaded OpenBLAS
// already (too late), or when the child fails or takes over 10 s.
std::vector<std::pair<std::string, std::string>> blas_choice_for_later_load();

}  // namespace hp
