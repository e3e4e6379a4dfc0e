#pragma once
// What the files of nixl._bindings share: the agent type, the status checks and the functions
// that add each part of the module (called in this order by module.cpp):
//
//   enums.cpp      constants and enums (nixl_mem_t, nixl_status_t, ...)
//   errors.cpp     one Python exception per error status, and the translation of nixl::error
//   convert.cpp    Python objects (tuples, numpy arrays, ints) -> descriptors and indices
//   lists.cpp      nixlXferDList, nixlRegDList, nixlRemoteDList and their serialization
//   config.cpp     nixlAgentConfig and nixlXferTelemetry
//   agent.cpp      nixlAgent: construction, backends, memory registration (agent.hpp)
//   transfers.cpp  nixlAgent: prepared lists, transfer requests, notifications
//   metadata.cpp   nixlAgent: local/remote metadata and the metadata exchange
//   log.cpp        `_log` (the C++ library logs to stderr, not through Python)

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // in every file: the same casters everywhere

#include <cstdint>
#include <string_view>

#include <nixl/runtime/agent.hpp>  // the run-time facade, the core and every linked component

namespace nixl::python {

namespace py = pybind11;

// The agent type: every backend this build links, in the umbrella's order (UCX, POSIX, CUDA,
// GDS, GDS_MT, LIBFABRIC, OBJ, AZURE_BLOB, each as built), behind the run-time facade.
using runtime::agent_t;
using runtime::default_comm_port;
using runtime::prepared_t;
using runtime::request_t;

/// NIXL's nixl_cost_t.
enum class cost_method : std::int32_t { analytical_backend = 0 };

/// Throws `nixl::error(s)` naming `call` (raised in Python as the status's exception).
[[noreturn]] void throw_status(status s, std::string_view call);

/// Returns `s` when it is not an error, throws otherwise.
status check(status s, std::string_view call);

class py_agent;

void bind_enums(py::module_& m);
void bind_exceptions(py::module_& m);
void bind_lists(py::module_& m);
void bind_config(py::module_& m);
void bind_agent(py::class_<py_agent>& c);
void bind_transfers(py::class_<py_agent>& c);
void bind_metadata(py::class_<py_agent>& c);
void bind_log(py::module_& m);

}  // namespace nixl::python
