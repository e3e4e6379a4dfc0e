// The C++ library's log lines go to stderr, as NIXL's (absl) do, whether or not Python is
// loaded: include/nixl/log.hpp writes each one whole with one write(2). Only the Python side's
// own messages go through the `nixl` logger (its handler on stdout), as in NIXL's package.

#include <algorithm>

#include "module.hpp"

namespace nixl::python {

void bind_log(py::module_& m) {
  // Logs a line as the C++ library does, from a thread without the GIL (tests use it).
  m.def(
      "_log",
      [](int lvl, const std::string& msg) {
        auto l = static_cast<log::level>(std::clamp(lvl, 0, 4));
        py::gil_scoped_release nogil;
        log::write(l, "{}", msg);
      },
      py::arg("level"), py::arg("message"));
}

}  // namespace nixl::python
