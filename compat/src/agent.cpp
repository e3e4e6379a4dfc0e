// nixlAgent: construction, the handle registry, backends and memory registration.

#include <chrono>

#include "compat.hpp"

namespace nixl::compat {

xfer_op op_of(nixl_xfer_op_t op) {
  if (op != NIXL_READ && op != NIXL_WRITE)
    raise(status::invalid_param, "operation {} is neither NIXL_READ nor NIXL_WRITE",
          static_cast<int>(op));
  return op == NIXL_READ ? xfer_op::read : xfer_op::write;
}

xfer_dlist to_core(const nixl_xfer_dlist_t& l) {
  xfer_dlist out(kind_of(l.getType()));
  out.reserve(static_cast<std::size_t>(l.descCount()));
  for (const auto& d : l) out.push_back(desc{d.addr, d.len, d.devId});
  return out;
}

reg_dlist to_core(const nixl_reg_dlist_t& l) {
  reg_dlist out(kind_of(l.getType()));
  out.reserve(static_cast<std::size_t>(l.descCount()));
  for (const auto& d : l) out.push_back(reg_desc{{d.addr, d.len, d.devId}, d.metaInfo});
  return out;
}

nixl_b_params_t to_nixl(const params& p) {
  return nixl_b_params_t(p.begin(), p.end());
}

nixl_mem_list_t to_nixl(const std::vector<mem_kind>& ks) {
  nixl_mem_list_t out;
  out.reserve(ks.size());
  for (auto k : ks) out.push_back(mem_of(k));
  return out;
}

namespace {

thread_sync sync_of(nixl_thread_sync_t s) {
  switch (s) {
    case nixl_thread_sync_t::NIXL_THREAD_SYNC_STRICT:
      return thread_sync::strict;
    case nixl_thread_sync_t::NIXL_THREAD_SYNC_RW:
      return thread_sync::rw;
    default:
      return thread_sync::none;
  }
}

/// nixlAgentConfig's fields as the facade's configuration.
runtime::config runtime_config(const nixlAgentConfig& c) {
  runtime::config r;
  r.prog_thread = c.useProgThread;
  r.listen_thread = c.useListenThread;
  r.listen_port = c.listenPort;
  r.sync = sync_of(c.syncMode);
  r.capture_telemetry = c.captureTelemetry;
  r.progress_delay = std::chrono::microseconds(c.pthrDelay);
  r.etcd_watch_timeout = c.etcdWatchTimeout;
  r.xfer_stall_timeout = c.xferStallTimeout;
  return r;
}

}  // namespace
}  // namespace nixl::compat

using namespace nixl::compat;

// nixlAgentData

nixlAgentData::nixlAgentData(const std::string& name, const nixlAgentConfig& c)
    : rt(name, runtime_config(c)) {
  if (c.useListenThread)
    nixl::log::info("agent '{}': MD listener is listening on port {}", name, rt.listen_port());
}

nixlBackendH* nixlAgentData::backend(std::string_view name) {
  const auto* b = rt.find_backend(name);
  if (b == nullptr) return nullptr;
  std::lock_guard g(backends_mutex_);
  for (auto& [k, h] : backends_)
    if (k == b) return h.get();
  backends_.emplace_back(
      b, std::unique_ptr<nixlBackendH>(new nixlBackendH(b->name, b->remote, b->local, b->notif)));
  return backends_.back().second.get();
}

bool nixlAgentData::owns(const nixlBackendH* b) const noexcept {
  std::lock_guard g(backends_mutex_);
  for (const auto& [k, h] : backends_)
    if (h.get() == b) return true;
  return false;
}

nixl::backend_options nixlAgentData::options(const nixl_opt_args_t* x) const {
  nixl::backend_options o;
  if (x == nullptr) return o;
  for (const auto* b : x->backends) {
    if (!owns(b))
      nixl::raise(nixl::status::invalid_param,
                  "backend handle {} is not a backend of agent '{}'; use the handle its "
                  "createBackend gave",
                  static_cast<const void*>(b), rt.name());
    o.backends.push_back(b->getType());
  }
  return o;
}

// nixlAgent: construction and backends

nixlAgent::nixlAgent(const std::string& name, const nixlAgentConfig& cfg)
    : data(std::make_unique<nixlAgentData>(name, cfg)) {}

nixlAgent::~nixlAgent() = default;

nixl_status_t nixlAgent::getAvailPlugins(std::vector<nixl_backend_t>& plugins) {
  return guarded("getAvailPlugins", [&] { plugins = nixl::runtime::agent::available_backends(); });
}

nixl_status_t nixlAgent::getPluginParams(const nixl_backend_t& type, nixl_mem_list_t& mems,
                                         nixl_b_params_t& params) const {
  return guarded("getPluginParams", [&] {
    auto p = agent_t::plugin_params(type);
    params = to_nixl(p.first);
    mems = to_nixl(p.second);
  });
}

nixl_status_t nixlAgent::getBackendParams(const nixlBackendH* backend, nixl_mem_list_t& mems,
                                          nixl_b_params_t& params) const {
  return guarded("getBackendParams", [&] {
    if (backend == nullptr || !data->owns(backend))
      nixl::raise(nixl::status::invalid_param,
                  "getBackendParams: the backend handle is not one of this agent's");
    auto p = data->agent().backend_params(backend->getType());
    params = to_nixl(p.first);
    mems = to_nixl(p.second);
  });
}

nixl_status_t nixlAgent::createBackend(const nixl_backend_t& type, const nixl_b_params_t& params,
                                       nixlBackendH*& backend) {
  backend = nullptr;  // as NIXL: a failed call leaves the out-handle null
  return guarded("createBackend", [&] {
    nixl::params p(params.begin(), params.end());
    backend = data->backend(data->rt.create_backend(type, p).name);
  });
}

// Memory

nixl_status_t nixlAgent::registerMem(const nixl_reg_dlist_t& descs,
                                     const nixl_opt_args_t* extra_params) {
  return guarded("registerMem", [&] {
    data->agent().register_memory(to_core(descs), data->options(extra_params));
  });
}

nixl_status_t nixlAgent::deregisterMem(const nixl_reg_dlist_t& descs,
                                       const nixl_opt_args_t* extra_params) {
  return guarded("deregisterMem", [&] {
    data->agent().deregister_memory(to_core(descs), data->options(extra_params));
  });
}

nixl_status_t nixlAgent::queryMem(const nixl_reg_dlist_t& descs,
                                  std::vector<nixl_query_resp_t>& resp,
                                  const nixl_opt_args_t* extra_params) const {
  return guarded("queryMem", [&] {
    auto r = data->agent().query_memory(to_core(descs), data->options(extra_params));
    resp.clear();
    resp.reserve(r.size());
    for (auto& e : r) {
      if (e)
        resp.emplace_back(to_nixl(*e));
      else
        resp.emplace_back(std::nullopt);
    }
  });
}

nixl_status_t nixlAgent::makeConnection(const std::string& remote_agent,
                                        const nixl_opt_args_t* extra_params) {
  return guarded("makeConnection",
                 [&] { data->agent().make_connection(remote_agent, data->options(extra_params)); });
}
