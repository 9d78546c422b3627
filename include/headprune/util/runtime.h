// Process-wide runtime settings: threads, seeds, and a description of the math libraries
// in use (benchmark records must state them to be comparable).
#pragma once

#include <cstdint>
#include <string>

namespace hp {

// Sets ATen's intra-op threads; n <= 0 means all cores. Returns the count in effect.
int configure_threads(int n);
int hardware_threads();
void seed_everything(uint64_t seed);
// e.g. "OpenBLAS 0.3.21 (OpenMP) core=Haswell, OPENBLAS_CORETYPE=Haswell"
std::string blas_info();

}  // namespace hp
