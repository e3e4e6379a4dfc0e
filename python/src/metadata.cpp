// nixlAgent: local and remote metadata, and the metadata exchange (listener, etcd) in a build
// with nixl::metadata; without it the exchange calls raise nixlNotSupportedError.

#include "agent.hpp"

namespace nixl::python {

template <class F>
void py_agent::with_exchange(std::string_view call, const std::string& ip, int port,
                             const std::string& label, F&& f) {
  const auto where = runtime::address_of(ip, port, label);
  rt_.with_exchange(call, where, [&](auto& x, const auto& t) {
    py::gil_scoped_release rel;
    (void)f(x, t);
  });
}

void bind_metadata(py::class_<py_agent>& c) {
  using bl = std::vector<std::uintptr_t>;
  const auto no_backends = bl{};
  c.def("getLocalMD",
        [](py_agent& a) {
          std::string s;
          {
            py::gil_scoped_release rel;
            s = a.get().local_metadata();
          }
          return py::bytes(s);
        })
      .def(
          "getLocalPartialMD",
          [](py_agent& a, const reg_dlist& l, bool inc, const bl& bs) {
            auto o = a.options(bs);
            std::string s;
            {
              py::gil_scoped_release rel;
              s = a.get().local_partial_metadata(l, inc, o);
            }
            return py::bytes(s);
          },
          py::arg("descs"), py::arg("inc_conn_info") = false, py::arg("backends") = no_backends)
      .def(
          "loadRemoteMD",
          [](py_agent& a, const std::string& md) {
            std::string name;
            {
              py::gil_scoped_release rel;
              name = a.get().load_remote_metadata(std::string_view(md));
            }
            return py::bytes(name);
          },
          py::arg("remote_metadata"))
      .def(
          "invalidateRemoteMD",
          [](py_agent& a, const std::string& remote) {
            py::gil_scoped_release rel;
            a.get().invalidate_remote_metadata(remote);
          },
          py::arg("remote_agent"))
      .def(
          "sendLocalMD",
          [](py_agent& a, const std::string& ip, int port) {
            a.with_exchange("sendLocalMD", ip, port, "",
                            [](auto& x, const auto& t) { return x.send_local_metadata(t); });
          },
          py::arg("ip_addr") = std::string(), py::arg("port") = 0)
      .def(
          "sendLocalPartialMD",
          [](py_agent& a, const reg_dlist& l, bool inc, const bl& bs, const std::string& ip,
             int port, const std::string& label) {
            auto o = a.options(bs);
            a.with_exchange("sendLocalPartialMD", ip, port, label, [&](auto& x, const auto& t) {
              return x.send_partial_metadata(l, inc, t, o);
            });
          },
          py::arg("descs"), py::arg("inc_conn_info") = false, py::arg("backends") = no_backends,
          py::arg("ip_addr") = std::string(), py::arg("port") = 0, py::arg("label") = std::string())
      .def(
          "fetchRemoteMD",
          [](py_agent& a, const std::string& remote, const std::string& ip, int port,
             const std::string& label) {
            a.with_exchange("fetchRemoteMD", ip, port, label, [&](auto& x, const auto& t) {
              return x.fetch_remote_metadata(remote, t);
            });
          },
          py::arg("remote_name"), py::arg("ip_addr") = std::string(), py::arg("port") = 0,
          py::arg("label") = std::string())
      .def(
          "invalidateLocalMD",
          [](py_agent& a, const std::string& ip, int port) {
            a.with_exchange("invalidateLocalMD", ip, port, "",
                            [](auto& x, const auto& t) { return x.invalidate_local_metadata(t); });
          },
          py::arg("ip_addr") = std::string(), py::arg("port") = 0)
      .def(
          "checkRemoteMD",
          [](py_agent& a, const std::string& remote, const xfer_dlist& l) {
            bool ok;
            {
              py::gil_scoped_release rel;
              ok = a.get().check_remote_metadata(remote, l);
            }
            return ok ? status::success : status::not_found;
          },
          py::arg("remote_name"), py::arg("descs"))
      // Not in NIXL: the port the metadata listener bound (useful with listenPort 0).
      .def("getListenPort", [](py_agent& a) { return a.listen_port(); });
}

}  // namespace nixl::python
