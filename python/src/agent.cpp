// nixlAgent: construction, backends and memory registration (agent.hpp), and the binding of
// those methods.

#include "agent.hpp"

#include <chrono>
#include <stdexcept>

namespace nixl::python {
namespace {

py::tuple params_tuple(const std::pair<params, std::vector<mem_kind>>& p) {
  py::dict d;
  for (const auto& [k, v] : p.first) d[py::str(k)] = py::str(v);
  py::list mems;
  for (auto k : p.second) mems.append(py::str(std::string(nixl_name(k))));
  return py::make_tuple(d, mems);
}

/// nixlAgentConfig's fields as the facade's configuration.
runtime::config runtime_config(const py_config& c) {
  runtime::config r;
  r.prog_thread = c.useProgThread;
  r.listen_thread = c.useListenThread;
  r.listen_port = c.listenPort;
  r.sync = c.syncMode;
  r.capture_telemetry = c.captureTelemetry;
  r.progress_delay = std::chrono::microseconds(c.pthrDelay);
  r.etcd_watch_timeout = std::chrono::microseconds(c.etcdWatchTimeout);
  r.xfer_stall_timeout = c.xferStallTimeout;
  r.listen_address = c.listenAddress;
  r.metadata_secret = c.metadataSecret;
  return r;
}

}  // namespace

py_agent::py_agent(const std::string& name, const py_config& c) : rt_(name, runtime_config(c)) {}

// Backends

std::vector<std::string> py_agent::avail_plugins() const {
  return runtime::agent::available_backends();
}

py::tuple py_agent::plugin_params(const std::string& name) const {
  return params_tuple(agent_t::plugin_params(name));
}

std::uintptr_t py_agent::create_backend(const std::string& name,
                                        const std::map<std::string, std::string>& p) {
  params prm(p.begin(), p.end());
  py::gil_scoped_release rel;
  return reinterpret_cast<std::uintptr_t>(&rt_.create_backend(name, prm));
}

const std::string& py_agent::backend_name(std::uintptr_t h) const {
  return rt_.checked(reinterpret_cast<const void*>(h)).name;
}

std::uintptr_t py_agent::backend_handle(std::string_view name) {
  return reinterpret_cast<std::uintptr_t>(rt_.find_backend(name));
}

py::tuple py_agent::backend_params(std::uintptr_t h) const {
  return params_tuple(rt_.core().backend_params(backend_name(h)));
}

backend_options py_agent::options(const std::vector<std::uintptr_t>& hs) const {
  std::vector<const runtime::backend*> bs;
  bs.reserve(hs.size());
  for (auto h : hs) bs.push_back(reinterpret_cast<const runtime::backend*>(h));
  return rt_.options(bs);
}

// Memory

status py_agent::register_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs) {
  auto o = options(bs);
  py::gil_scoped_release rel;
  get().register_memory(l, o);
  return status::success;
}

status py_agent::deregister_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs) {
  auto o = options(bs);
  py::gil_scoped_release rel;
  get().deregister_memory(l, o);
  return status::success;
}

py::list py_agent::query_mem(const reg_dlist& l, std::uintptr_t b) {
  auto o = options({b});
  std::vector<std::optional<params>> r;
  {
    py::gil_scoped_release rel;
    r = get().query_memory(l, o);
  }
  py::list out;
  for (const auto& e : r) {
    if (!e) {
      out.append(py::none());
      continue;
    }
    py::dict d;
    for (const auto& [k, v] : *e) d[py::str(k)] = py::str(v);
    out.append(d);
  }
  return out;
}

void bind_agent(py::class_<py_agent>& c) {
  using bl = std::vector<std::uintptr_t>;
  const auto no_backends = bl{};
  c.def(py::init<const std::string&, const py_config&>(), py::arg("name"), py::arg("config"))
      .def("getAvailPlugins", &py_agent::avail_plugins)
      .def("getPluginParams", &py_agent::plugin_params, py::arg("type"))
      .def("getBackendParams", &py_agent::backend_params, py::arg("backend"))
      .def("createBackend", &py_agent::create_backend, py::arg("type"),
           py::arg("initParams") = std::map<std::string, std::string>{})
      .def("registerMem", &py_agent::register_mem, py::arg("descs"),
           py::arg("backends") = no_backends)
      .def("deregisterMem", &py_agent::deregister_mem, py::arg("descs"),
           py::arg("backends") = no_backends)
      .def("queryMem", &py_agent::query_mem, py::arg("descs"), py::arg("backend"))
      .def(
          "makeConnection",
          [](py_agent& a, const std::string& remote, const bl& bs) {
            auto o = a.options(bs);
            py::gil_scoped_release rel;
            a.get().make_connection(remote, o);
          },
          py::arg("remote_agent"), py::arg("backends") = no_backends)
      .def(
          "prepMemView",
          [](py_agent& a, const py::object& descs, const bl& bs) -> std::uintptr_t {
            return prep_mem_view(a, descs, bs);
          },
          py::arg("descs"), py::arg("backends") = no_backends)
      .def(
          "releaseMemView", [](py_agent& a, std::uintptr_t h) { release_mem_view(a, h); },
          py::arg("mem_view"))
      .def("getName", [](py_agent& a) { return a.get().name(); })
      // Telemetry events: whether the agent exports them, and one added by nixl._api.
      .def("_telemetryExport", [](py_agent& a) { return a.get().telemetry_exporting(); })
      .def(
          "_telemetryEvent",
          [](py_agent& a, std::uint32_t id, std::uint64_t value) {
            if (id >= telemetry_event_count)
              throw nixl::error(status::invalid_param,
                                fmt::format("_telemetryEvent: no event id {}", id));
            a.get().record_telemetry(static_cast<telemetry_event>(id), value);
          },
          py::arg("event"), py::arg("value"))
      .def("progress", [](py_agent& a) {
        py::gil_scoped_release rel;
        a.get().progress();
      });
}

}  // namespace nixl::python
