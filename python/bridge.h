// What the Python module's files share (python/module.cc, model.cc, jobs.cc): requests arrive as JSON
// text (Python's json.dumps of the keyword arguments) and results leave as JSON text plus tensors; a
// job runs without the GIL while its progress and notes reach Python callables, which may end it by
// raising (KeyboardInterrupt between steps). Only this directory includes pybind11; the library
// knows nothing of Python.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

// pybind11 together with LibTorch's casters: a torch::Tensor crosses to and from a Python
// torch.Tensor sharing its storage (libtorch_python, the one python3-torch itself uses).
#include <torch/csrc/utils/pybind.h>

#include <nlohmann/json.hpp>

#include "headprune/data/model_dir.h"
#include "headprune/jobs/job.h"
#include "headprune/util/interrupt.h"
#include "headprune/util/json_fields.h"
#include "headprune/util/runtime.h"

namespace hp::python {

namespace py = pybind11;

// The JSON text Python sent, parsed; malformed text is std::invalid_argument naming `what`.
nlohmann::json parse_json(const std::string& text, const std::string& what);
// A result as JSON text for json.loads (invalid UTF-8 replaced, never an exception).
std::string dump_json(const nlohmann::json& j);

// The keyword arguments of the Python function `fn` ("headprune.importance"): errors read
// "headprune.importance: argument 'beam' must be an integer >= 1, not 0" (std::invalid_argument).
JsonFields arguments(const nlohmann::json& j, const std::string& fn);
// An integer argument >= lo (dflt when absent).
int64_t int_at_least(const JsonFields& f, const std::string& key, int64_t dflt, int64_t lo);

// The runtime of {"device", "dtype", "seed", "threads"} (threads absent: ATen's current count, so a
// notebook's torch.set_num_threads stands), applied process-wide as the CLI applies its options.
Runtime start_runtime(const std::string& runtime_json);

// Raised through the library by a callback when Python raised inside it; Events::run turns it back
// into the Python exception.
struct PythonRaised : std::runtime_error {
  PythonRaised() : std::runtime_error("interrupted from Python") {}
};

// A job's JobEvents backed by Python callables: progress(phase, done, total, unit, extra) and
// note(tag, line), either None. Before each call, pending signals are handled (PyErr_CheckSignals),
// so Ctrl-C raises KeyboardInterrupt at the job's next step. Construct and destroy with the GIL held.
class Events {
 public:
  Events(py::object progress, py::object note);
  const JobEvents& events() const { return events_; }

  // Runs job(events()) with the GIL released. A Python exception raised by a callback (or by the
  // signal check) is rethrown as that exception once the library has unwound.
  template <typename F>
  auto run(F&& job) -> decltype(job(std::declval<const JobEvents&>())) {
    try {
      py::gil_scoped_release release;
      InterruptCheck ctrl_c(signal_check());  // Ctrl-C within a forward pass, not at the next progress step
      return job(events_);
    } catch (...) {
      rethrow_pending();
      throw;
    }
  }

  // The callbacks' shared state (public for the callbacks in module.cc).
  struct State;

 private:
  void rethrow_pending();
  std::function<void()> signal_check() const;  // the signal check alone (util/interrupt.h)
  std::shared_ptr<State> state_;
  JobEvents events_;
};

// The object behind headprune.Model: a loaded model directory (model.cc binds it; jobs.cc scores
// it in place when the data are token ids).
struct Model {
  LoadedModel loaded;
  TransformerImpl& impl() { return *loaded.model; }
  const ModelConfig& config() const { return loaded.model->config(); }
  torch::Device device() const { return loaded.model->parameters().front().device(); }
};

// Registration of the bindings, one function per file.
void register_model(py::module_& m);  // model.cc: class Model
void register_jobs(py::module_& m);   // jobs.cc: the job functions

}  // namespace hp::python
