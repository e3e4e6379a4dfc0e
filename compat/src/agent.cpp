// nixlAgent: construction, the handle registry, backends and memory registration.

#include <chrono>

#include "compat.hpp"

namespace nixl::compat {

mem_kind kind_of(nixl_mem_t m) {
  const int v = static_cast<int>(m);
  if (v < 0 || v >= static_cast<int>(mem_kind_count))
    raise(status::invalid_param,
          "memory type {} is not a NIXL segment type; use DRAM_SEG, VRAM_SEG, BLK_SEG, OBJ_SEG "
          "or FILE_SEG",
          v);
  return static_cast<mem_kind>(v);
}

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

/// What NIXL's nixlBackendH reports, from the backend type's concepts.
template <class... B>
void capabilities(detail::type_list<B...>, std::string_view name, bool& remote, bool& local,
                  bool& notif) {
  detail::for_each_type<B...>([&]<class T>() {
    if (T::name == name) {
      remote = remote_backend<T>;
      local = loopback_backend<T>;
      notif = notifying_backend<T>;
    }
  });
}

}  // namespace
}  // namespace nixl::compat

using namespace nixl::compat;

// nixlAgentData

nixlAgentData::nixlAgentData(const std::string& name, const nixlAgentConfig& c) {
  if (name.empty()) throw std::invalid_argument("nixlAgent: the agent name is empty");
  nixl::agent_config cfg;
  cfg.enable_prog_thread = c.useProgThread;
  cfg.sync = nixl::compat::sync_of(c.syncMode);
  cfg.capture_telemetry = c.captureTelemetry;
  cfg.progress_delay = std::chrono::microseconds(c.pthrDelay);
  agent_ = std::make_unique<agent_t>(name, std::move(cfg));
#if defined(NIXL_HAS_METADATA)
  nixl::metadata::config mc;
  mc.listen = c.useListenThread;
  mc.listen_port = c.listenPort;
  mc.etcd_watch_timeout = c.etcdWatchTimeout;
  exchange_ = std::make_unique<nixl::metadata::exchange>(*agent_, std::move(mc));
  if (c.useListenThread)
    nixl::log::info("agent '{}': MD listener is listening on port {}", name, exchange_->port());
#else
  if (c.useListenThread)
    throw nixl::error(nixl::status::not_supported,
                      "nixlAgent: useListenThread needs the metadata exchange; build with "
                      "NIXL_WITH_METADATA=ON");
#endif
}

nixlAgentData::~nixlAgentData() {
  // Requests and prepared lists point into the agent, and the exchange's threads call it: all
  // go before the agent.
  {
    std::lock_guard g(mutex_);
    for (auto* r : reqs_) delete r;
    reqs_.clear();
    for (auto* d : dlists_) delete d;
    dlists_.clear();
  }
#if defined(NIXL_HAS_METADATA)
  exchange_.reset();
#endif
  agent_.reset();
}

nixlBackendH* nixlAgentData::backend(std::string_view name) {
  std::lock_guard g(backends_mutex_);
  for (auto& b : backends_)
    if (b->type_ == name) return b.get();
  if (!agent_->has_backend(name)) return nullptr;
  bool remote = false, local = false, notif = false;
  nixl::compat::capabilities(agent_t::backend_types{}, name, remote, local, notif);
  backends_.push_back(
      std::unique_ptr<nixlBackendH>(new nixlBackendH(std::string(name), remote, local, notif)));
  return backends_.back().get();
}

bool nixlAgentData::owns(const nixlBackendH* b) const noexcept {
  std::lock_guard g(backends_mutex_);
  for (const auto& p : backends_)
    if (p.get() == b) return true;
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
                  static_cast<const void*>(b), agent_->name());
    o.backends.push_back(b->getType());
  }
  return o;
}

void nixlAgentData::keep(nixlXferReqH* h) {
  std::lock_guard g(mutex_);
  reqs_.insert(h);
}
void nixlAgentData::forget(nixlXferReqH* h) noexcept {
  std::lock_guard g(mutex_);
  reqs_.erase(h);
}
void nixlAgentData::keep(nixlDlistH* h) {
  std::lock_guard g(mutex_);
  dlists_.insert(h);
}
void nixlAgentData::forget(nixlDlistH* h) noexcept {
  std::lock_guard g(mutex_);
  dlists_.erase(h);
}

// nixlAgent: construction and backends

nixlAgent::nixlAgent(const std::string& name, const nixlAgentConfig& cfg)
    : data(std::make_unique<nixlAgentData>(name, cfg)) {}

nixlAgent::~nixlAgent() = default;

nixl_status_t nixlAgent::getAvailPlugins(std::vector<nixl_backend_t>& plugins) {
  return guarded("getAvailPlugins", [&] {
    plugins.clear();
    for (auto n : agent_t::available_backends()) plugins.emplace_back(n);
  });
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
  return guarded("createBackend", [&] {
    nixl::params p(params.begin(), params.end());
    data->agent().create_backend(type, p);
    backend = data->backend(type);
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
