// headprune executable: all logic lives in the library and cli/app.cc.
#include <iostream>

#include "app.h"
#include "headprune/util/blas.h"
#include "headprune/util/runtime.h"

int main(int argc, char** argv) {
  // First, before any thread starts: OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so better
  // kernels for this CPU mean starting again with it set (never when the user has set it).
  hp::use_best_blas_kernels(argv);
  hp::tune_allocator();  // large activations reused from the heap instead of mapped afresh every time
  return hp::cli::run(argc, argv, std::cout, std::cerr);
}
