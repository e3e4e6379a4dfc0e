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

}  // namespace

py_agent::py_agent(const std::string& name, const py_config& c) {
  if (name.empty()) throw std::invalid_argument("nixlAgent: the agent name is empty");
  if (c.listenPort < 0 || c.listenPort > 65535)
    throw nixl::error(
        status::invalid_param,
        fmt::format("nixlAgentConfig: listenPort {} is not a TCP port", c.listenPort));
  agent_config cfg;
  cfg.enable_prog_thread = c.useProgThread;
  cfg.sync = c.syncMode;
  cfg.capture_telemetry = c.captureTelemetry;
  cfg.progress_delay = std::chrono::microseconds(c.pthrDelay);
  agent_ = std::make_unique<agent_t>(name, std::move(cfg));
#if defined(NIXL_HAS_METADATA)
  metadata::config mc;
  mc.listen = c.useListenThread;
  mc.listen_port = static_cast<std::uint16_t>(c.listenPort);
  mc.listen_address = c.listenAddress;
  mc.metadata_secret = c.metadataSecret;
  mc.etcd_watch_timeout = std::chrono::microseconds(c.etcdWatchTimeout);
  exchange_ = std::make_unique<metadata::exchange>(*agent_, std::move(mc));
#else
  if (c.useListenThread)
    throw nixl::error(status::not_supported,
                      "nixlAgent: useListenThread needs the metadata exchange; build with "
                      "NIXL_WITH_METADATA=ON");
#endif
}

py_agent::~py_agent() {
  // Requests and prepared lists must go before the agent they point into, and the exchange
  // (whose threads call the agent) before the agent.
  reqs_.clear();
  dlists_.clear();
#if defined(NIXL_HAS_METADATA)
  exchange_.reset();
#endif
  agent_.reset();
}

// Backends

std::vector<std::string> py_agent::avail_plugins() const {
  std::vector<std::string> out;
  for (auto n : agent_t::available_backends()) out.emplace_back(n);
  return out;
}

py::tuple py_agent::plugin_params(const std::string& name) const {
  return params_tuple(agent_t::plugin_params(name));
}

std::uintptr_t py_agent::create_backend(const std::string& name,
                                        const std::map<std::string, std::string>& p) {
  params prm(p.begin(), p.end());
  {
    py::gil_scoped_release rel;
    agent_->create_backend(name, prm);
  }
  auto h = std::make_unique<std::string>(name);
  const auto id = reinterpret_cast<std::uintptr_t>(h.get());
  backends_.emplace(id, std::move(h));
  return id;
}

const std::string& py_agent::backend_name(std::uintptr_t h) const {
  auto it = backends_.find(h);
  if (it == backends_.end())
    throw nixl::error(status::invalid_param,
                      fmt::format("backend handle {:#x} is not a backend of this agent; use the "
                                  "handle createBackend returned",
                                  h));
  return *it->second;
}

std::uintptr_t py_agent::backend_handle(std::string_view name) const {
  for (const auto& [id, n] : backends_)
    if (*n == name) return id;
  return 0;
}

py::tuple py_agent::backend_params(std::uintptr_t h) const {
  return params_tuple(agent_->backend_params(backend_name(h)));
}

backend_options py_agent::options(const std::vector<std::uintptr_t>& hs) const {
  backend_options o;
  for (auto h : hs) o.backends.push_back(backend_name(h));
  return o;
}

// Memory

status py_agent::register_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs) {
  auto o = options(bs);
  py::gil_scoped_release rel;
  agent_->register_memory(l, o);
  return status::success;
}

status py_agent::deregister_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs) {
  auto o = options(bs);
  py::gil_scoped_release rel;
  agent_->deregister_memory(l, o);
  return status::success;
}

py::list py_agent::query_mem(const reg_dlist& l, std::uintptr_t b) {
  auto o = options({b});
  std::vector<std::optional<params>> r;
  {
    py::gil_scoped_release rel;
    r = agent_->query_memory(l, o);
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
          [](py_agent&, const py::object&, const bl&) -> std::uintptr_t {
            throw nixl::error(status::not_supported,
                              "prepMemView: the GPU device API is not part of this build");
          },
          py::arg("descs"), py::arg("backends") = no_backends)
      .def(
          "releaseMemView",
          [](py_agent&, std::uintptr_t) {
            throw nixl::error(status::not_supported,
                              "releaseMemView: the GPU device API is not part of this build");
          },
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
