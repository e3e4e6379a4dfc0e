// One Python exception class per error status (NIXL's nixl*Error, RuntimeError subclasses), and
// the translation of a nixl::error thrown anywhere in the module into the one of its status.

#include <exception>
#include <string>
#include <utility>

#include "module.hpp"

namespace nixl::python {
namespace {

/// One Python exception class per negative status, index = -status.
PyObject* g_exc[-static_cast<int>(last_error) + 1] = {};

PyObject* exception_for(status s) {
  const int i = -static_cast<int>(s);
  if (i >= 1 && i <= -static_cast<int>(last_error) && g_exc[i] != nullptr) return g_exc[i];
  return g_exc[8] != nullptr ? g_exc[8] : PyExc_RuntimeError;  // unknown
}

}  // namespace

[[noreturn]] void throw_status(status s, std::string_view call) {
  throw nixl::error(s, fmt::format("{}: {}", call, to_string(s)));
}

status check(status s, std::string_view call) {
  if (static_cast<int>(s) < 0) throw_status(s, call);
  return s;
}

void bind_exceptions(py::module_& m) {
  const std::pair<const char*, int> excs[] = {
      {"nixlNotPostedError", 1},         {"nixlInvalidParamError", 2}, {"nixlBackendError", 3},
      {"nixlNotFoundError", 4},          {"nixlMismatchError", 5},     {"nixlNotAllowedError", 6},
      {"nixlRepostActiveError", 7},      {"nixlUnknownError", 8},      {"nixlNotSupportedError", 9},
      {"nixlRemoteDisconnectError", 10}, {"nixlCancelledError", 11},   {"nixlNoTelemetryError", 12},
      {"nixlXferStalledError", 13},
  };
  for (const auto& [name, idx] : excs) {
    const std::string full = std::string("nixl._bindings.") + name;
    PyObject* e = PyErr_NewException(full.c_str(), PyExc_RuntimeError, nullptr);
    if (e == nullptr) throw py::error_already_set();
    g_exc[idx] = e;  // one reference kept for the life of the process
    m.attr(name) = py::reinterpret_borrow<py::object>(e);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nixl::error& e) {
      PyErr_SetString(exception_for(e.status_code()), e.what());
    }
  });
}

}  // namespace nixl::python
