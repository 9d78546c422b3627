// The Python module headprune._headprune: thin bindings over the library (python/bridge.h). The
// Pythonic layer is python/headprune/__init__.py; docs/python.md shows it in use.
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "bridge.h"
#include "headprune/io/files.h"
#include "headprune/util/log.h"
#include "headprune/version.h"

namespace hp::python {

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  try {
    return hp::parse_json(text, what);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

JsonFields arguments(const nlohmann::json& j, const std::string& fn) {
  return JsonFields(j, "headprune." + fn,
                    JsonStyle{"argument", "is required", JsonStyle::Nulls::Absent, JsonStyle::Error::InvalidArgument});
}

int64_t int_at_least(const JsonFields& f, const std::string& key, int64_t dflt, int64_t lo) {
  const int64_t v = f.opt_int(key, dflt);
  if (v < lo) f.fail(key, "must be an integer >= " + std::to_string(lo) + ", not " + std::to_string(v));
  return v;
}

Runtime start_runtime(const std::string& runtime_json) {
  const nlohmann::json j = parse_json(runtime_json, "runtime");
  const JsonFields f = arguments(j, "runtime");
  f.only({"device", "dtype", "seed", "threads"}, "runtime argument");
  Runtime rt;
  rt.device = parse_device(f.opt_str("device", "cpu"));
  rt.dtype = parse_dtype(f.opt_str("dtype", "auto"));
  rt.seed = static_cast<uint64_t>(int_at_least(f, "seed", 1234, 0));
  rt.threads = static_cast<int>(int_at_least(f, "threads", at::get_num_threads(), 0));
  apply_runtime(rt);
  return rt;
}

struct Events::State {
  py::object progress, note;
  std::optional<py::error_already_set> pending;  // what a callback raised

  ~State() {  // the last owner may be a copy the library kept: drop the Python references under the GIL
    py::gil_scoped_acquire gil;
    progress = py::object();
    note = py::object();
    pending.reset();
  }

  // Checks for signals, then calls fn(args...) if it is set; anything Python raises is kept and ends
  // the job (PythonRaised unwinds the library; Events::run rethrows what was kept).
  template <typename... Args>
  void call(const py::object& fn, Args&&... args) {
    py::gil_scoped_acquire gil;
    if (pending) throw PythonRaised();
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (fn && !fn.is_none()) fn(std::forward<Args>(args)...);
    } catch (py::error_already_set& e) {
      pending.emplace(std::move(e));
      throw PythonRaised();
    }
  }
};

Events::Events(py::object progress, py::object note) : state_(std::make_shared<State>()) {
  state_->progress = std::move(progress);
  state_->note = std::move(note);
  // The callbacks hold the shared state, never a Python object: the library may copy them freely
  // without the GIL.
  std::shared_ptr<State> s = state_;
  events_.progress = [s](const JobEvents::Progress& p) { s->call(s->progress, p.phase, p.done, p.total, p.unit, p.extra); };
  events_.note = [s](const std::string& tag, const std::string& line) { s->call(s->note, tag, line); };
}

std::function<void()> Events::signal_check() const {
  std::shared_ptr<State> s = state_;
  return [s] { s->call(py::object()); };  // no callable: only PyErr_CheckSignals
}

void Events::rethrow_pending() {
  if (!state_->pending) return;
  py::error_already_set e = *state_->pending;
  state_->pending.reset();
  throw e;
}

namespace {

// The Python kind of a standard exception, as pybind11 translates it.
PyObject* python_kind(const std::exception& e) {
  if (dynamic_cast<const std::out_of_range*>(&e)) return PyExc_IndexError;
  if (dynamic_cast<const std::overflow_error*>(&e)) return PyExc_OverflowError;
  if (dynamic_cast<const std::invalid_argument*>(&e) || dynamic_cast<const std::domain_error*>(&e) ||
      dynamic_cast<const std::length_error*>(&e) || dynamic_cast<const std::range_error*>(&e))
    return PyExc_ValueError;
  return PyExc_RuntimeError;
}

// c10::Error and its kinds become the matching Python exceptions with the CLI's message
// (hp::error_message). Other errors keep pybind11's translation (std::invalid_argument -> ValueError,
// std::runtime_error -> RuntimeError, std::bad_alloc -> MemoryError, ...) and their message, unless a
// LibTorch backtrace is in it: then the CLI's cut message, same kind.
void translate_errors(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const py::error_already_set&) {
    throw;
  } catch (const c10::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, hp::error_message(e).c_str());
  } catch (const c10::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, hp::error_message(e).c_str());
  } catch (const c10::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, hp::error_message(e).c_str());
  } catch (const c10::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, hp::error_message(e).c_str());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, hp::error_message(e).c_str());
  } catch (const std::exception& e) {
    const std::string msg = hp::error_message(e);
    if (msg == e.what()) throw;  // no LibTorch backtrace in it: pybind11's translation, same message
    PyErr_SetString(python_kind(e), msg.c_str());
  }
}

}  // namespace

}  // namespace hp::python

PYBIND11_MODULE(_headprune, m) {
  namespace py = pybind11;
  using namespace hp::python;
  m.doc() = "headprune's C++ library (thin bindings; import headprune, not this module)";
  m.attr("version") = HP_VERSION_STRING;
  // Local to this module: torch._C, which shares pybind11's registry, keeps its own translation.
  py::register_local_exception_translator(&translate_errors);
  m.def(
      "set_log_level", [](const std::string& level) { hp::set_log_level(hp::parse_log_level(level)); }, py::arg("level"),
      "The library's log lines on stderr: error, warn, info or debug");
  register_model(m);
  register_jobs(m);
}
