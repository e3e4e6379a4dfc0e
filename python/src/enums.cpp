// Constants and enums of nixl._bindings, with NIXL's names and values.

#include <cstddef>
#include <string>

#include "module.hpp"

namespace nixl::python {
namespace {

/// NIXL's nixl_mem_t, nixl_xfer_op_t and nixl_status_t are plain C enums, so their Python
/// values compare equal to ints (`NIXL_SUCCESS == 0`); ours are enum classes, which pybind11
/// compares strictly. This gives them the plain-enum comparison (hashing is by value already).
template <class E>
void compare_with_ints(py::enum_<E>& e) {
  e.attr("__eq__") = py::cpp_function(
      [](const py::object& a, const py::object& b) { return !b.is_none() && py::int_(a).equal(b); },
      py::name("__eq__"), py::is_method(e), py::arg("other"));
  e.attr("__ne__") = py::cpp_function(
      [](const py::object& a, const py::object& b) { return b.is_none() || !py::int_(a).equal(b); },
      py::name("__ne__"), py::is_method(e), py::arg("other"));
}

/// Every value of a name table under its name, in the table's order or (`descending`) reversed.
template <class E, std::size_t N>
void add_values(py::enum_<E>& e, const nixl::detail::enum_names<E, N>& names,
                bool descending = false) {
  for (std::size_t k = 0; k < N; ++k) {
    const std::size_t i = descending ? N - 1 - k : k;
    const std::string name(names.names[i]);
    e.value(name.c_str(), names.at(i));
  }
  e.export_values();
}

}  // namespace

void bind_enums(py::module_& m) {
  m.attr("NIXL_INIT_AGENT") = "";
  m.attr("DEFAULT_COMM_PORT") = default_comm_port;
  // The device API (nixl_device.cuh and prepMemView) is part of builds with CUDA
  // (docs/device.md).
#ifdef HAVE_UCX_GPU_DEVICE_API
  m.attr("HAVE_UCX_GPU_DEVICE_API") = true;
#else
  m.attr("HAVE_UCX_GPU_DEVICE_API") = false;
#endif
  {
    py::list bl;
    for (auto n : agent_t::available_backends()) bl.append(py::str(std::string(n)));
    m.attr("_BUILT_BACKENDS") = bl;
  }
#if defined(NIXL_HAS_PROMETHEUS)
  m.attr("_BUILT_EXPORTERS") = py::make_tuple("prometheus", "prometheus_mp");
#else
  m.attr("_BUILT_EXPORTERS") = py::tuple();
#endif

  py::enum_<nixl::thread_sync>(m, "nixl_thread_sync_t")
      .value("NIXL_THREAD_SYNC_NONE", nixl::thread_sync::none)
      .value("NIXL_THREAD_SYNC_STRICT", nixl::thread_sync::strict)
      .value("NIXL_THREAD_SYNC_RW", nixl::thread_sync::rw)
      .value("NIXL_THREAD_SYNC_DEFAULT", nixl::thread_sync::none)
      .export_values();

  py::enum_<mem_kind> mem_enum(m, "nixl_mem_t");
  add_values(mem_enum, mem_kind_nixl_names);
  compare_with_ints(mem_enum);

  py::enum_<xfer_op> op_enum(m, "nixl_xfer_op_t");
  op_enum.value("NIXL_READ", xfer_op::read).value("NIXL_WRITE", xfer_op::write).export_values();
  compare_with_ints(op_enum);

  py::enum_<cost_method>(m, "nixl_cost_t")
      .value("NIXL_COST_ANALYTICAL_BACKEND", cost_method::analytical_backend)
      .export_values();

  // NIXL's order (in progress, success, then the errors from -1 down), names from the core.
  py::enum_<status> status_enum(m, "nixl_status_t");
  add_values(status_enum, status_names, true);
  compare_with_ints(status_enum);
}

}  // namespace nixl::python
