// nixlAgent.prepMemView / releaseMemView: memory views for GPU-initiated transfers over
// nixl::agent::prepare_view (include/nixl/agent/views.hpp; docs/device.md). Local views keep
// NIXL's base-address behaviour, as nixl.h's prepMemView does.

#include <cstdint>
#include <string>
#include <vector>

#include "agent.hpp"

namespace nixl::python {

std::uintptr_t prep_mem_view(py_agent& a, const py::object& descs,
                             const std::vector<std::uintptr_t>& bs) {
  view_options o;
  o.backends = a.options(bs).backends;
  if (py::isinstance<xfer_dlist>(descs)) {
    const auto& l = descs.cast<const xfer_dlist&>();
    o.registration_base = true;
    py::gil_scoped_release rel;
    return reinterpret_cast<std::uintptr_t>(a.get().prepare_view(l, o));
  }
  // nixlRemoteDList: read through its Python face, (addr, len, dev, agent) per entry.
  if (!py::hasattr(descs, "descCount") || !py::hasattr(descs, "getType"))
    throw py::type_error("prepMemView: descs must be an nixlXferDList or an nixlRemoteDList");
  const auto kind = descs.attr("getType")().cast<mem_kind>();
  const auto n = descs.attr("descCount")().cast<std::size_t>();
  std::vector<remote_entry> list;
  list.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = descs.attr("__getitem__")(i).cast<py::tuple>();
    list.push_back(
        {t[3].cast<std::string>(),
         desc{t[0].cast<std::uintptr_t>(), t[1].cast<std::size_t>(), t[2].cast<std::uint64_t>()}});
  }
  py::gil_scoped_release rel;
  return reinterpret_cast<std::uintptr_t>(a.get().prepare_view(kind, list, o));
}

void release_mem_view(py_agent& a, std::uintptr_t h) {
  bool ok = false;
  {
    py::gil_scoped_release rel;
    ok = a.get().release_view(reinterpret_cast<void*>(h));
  }
  if (!ok) log::warn("releaseMemView: Invalid memory view handle {:#x}", h);
}

}  // namespace nixl::python
