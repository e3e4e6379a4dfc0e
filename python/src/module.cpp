// nixl._bindings: NIXL's Python binding surface over one nixl::agent of every enabled backend.
//
// Handles cross into Python as integers (the address of an object this module owns), as in
// NIXL. Every call that returns a NIXL status raises the matching nixl*Error for a negative
// one; IN_PROG and SUCCESS are returned. Data-path calls release the GIL. module.hpp lists the
// file of each part.

#include "module.hpp"
#include "agent.hpp"

PYBIND11_MODULE(_bindings, m) {
  using namespace nixl::python;
  m.doc() = "NIXL-compatible bindings of the nixl C++ library";
  // Enums first: the default arguments of the classes below are enum values.
  bind_enums(m);
  bind_exceptions(m);
  bind_lists(m);
  bind_config(m);
  py::class_<py_agent> agent(m, "nixlAgent");
  bind_agent(agent);
  bind_transfers(agent);
  bind_metadata(agent);
  bind_log(m);
}
