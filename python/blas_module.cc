// The Python module headprune._blas: OpenBLAS's kernel choice (util/blas.h) without LibTorch, so that
// headprune/__init__.py can make it before `import torch` loads OpenBLAS, and report it after.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "headprune/util/blas.h"

namespace py = pybind11;

PYBIND11_MODULE(_blas, m) {
  m.doc() = "OpenBLAS kernel choice for headprune (no LibTorch)";
  // The GIL stays held: no other Python thread runs while the child process is forked.
  m.def("choice_for_later_load", [] {
    py::dict vars;
    for (const auto& [name, value] : hp::blas_choice_for_later_load()) vars[py::str(name)] = value;
    return vars;
  });
  m.def("kernels", [] {
    const hp::BlasKernels k = hp::inspect_blas_kernels();
    py::dict d;
    d["openblas"] = k.openblas;
    d["loaded"] = k.loaded;
    d["cpu_level"] = k.cpu_level;
    d["recommended"] = k.recommended;
    d["user_setting"] = k.user_setting;
    d["chosen_from"] = k.chosen_from;
    d["reason"] = k.reason;
    return d;
  });
}
