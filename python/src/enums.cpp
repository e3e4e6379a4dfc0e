// Constants and enums of nixl._bindings, with NIXL's names and values.

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

}  // namespace

void bind_enums(py::module_& m) {
  m.attr("NIXL_INIT_AGENT") = "";
  m.attr("DEFAULT_COMM_PORT") = default_comm_port;
  m.attr("HAVE_UCX_GPU_DEVICE_API") = false;
  {
    py::list bl;
    for (auto n : agent_t::available_backends()) bl.append(py::str(std::string(n)));
    m.attr("_BUILT_BACKENDS") = bl;
  }
#if defined(NIXL_HAS_PROMETHEUS)
  m.attr("_BUILT_EXPORTERS") = py::make_tuple("prometheus");
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
  mem_enum.value("DRAM_SEG", mem_kind::dram)
      .value("VRAM_SEG", mem_kind::vram)
      .value("BLK_SEG", mem_kind::block)
      .value("OBJ_SEG", mem_kind::object)
      .value("FILE_SEG", mem_kind::file)
      .export_values();
  compare_with_ints(mem_enum);

  py::enum_<xfer_op> op_enum(m, "nixl_xfer_op_t");
  op_enum.value("NIXL_READ", xfer_op::read).value("NIXL_WRITE", xfer_op::write).export_values();
  compare_with_ints(op_enum);

  py::enum_<cost_method>(m, "nixl_cost_t")
      .value("NIXL_COST_ANALYTICAL_BACKEND", cost_method::analytical_backend)
      .export_values();

  py::enum_<status> status_enum(m, "nixl_status_t");
  status_enum.value("NIXL_IN_PROG", status::in_progress)
      .value("NIXL_SUCCESS", status::success)
      .value("NIXL_ERR_NOT_POSTED", status::not_posted)
      .value("NIXL_ERR_INVALID_PARAM", status::invalid_param)
      .value("NIXL_ERR_BACKEND", status::backend)
      .value("NIXL_ERR_NOT_FOUND", status::not_found)
      .value("NIXL_ERR_MISMATCH", status::mismatch)
      .value("NIXL_ERR_NOT_ALLOWED", status::not_allowed)
      .value("NIXL_ERR_REPOST_ACTIVE", status::repost_active)
      .value("NIXL_ERR_UNKNOWN", status::unknown)
      .value("NIXL_ERR_NOT_SUPPORTED", status::not_supported)
      .value("NIXL_ERR_REMOTE_DISCONNECT", status::remote_disconnect)
      .value("NIXL_ERR_CANCELED", status::canceled)
      .value("NIXL_ERR_NO_TELEMETRY", status::no_telemetry)
      .export_values();
  compare_with_ints(status_enum);
}

}  // namespace nixl::python
