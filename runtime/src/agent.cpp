// nixl::runtime::agent: construction and teardown, backend handles, handle look-ups and the
// metadata exchange's address.

#include <nixl/runtime/agent.hpp>

#include <stdexcept>

namespace nixl::runtime {
namespace {

/// What a backend type supports, from its concepts.
template <class... B>
backend capabilities(detail::type_list<B...>, std::string_view name) {
  backend out;
  out.name = std::string(name);
  detail::for_each_type<B...>([&]<class T>() {
    if (T::name == name) {
      out.remote = remote_backend<T>;
      out.local = loopback_backend<T>;
      out.notif = notifying_backend<T>;
    }
  });
  return out;
}

}  // namespace

address address_of(std::string ip, int port, std::string label) {
  if (port < 0 || port > 65535) raise(status::invalid_param, "port {} is not a TCP port", port);
  return {std::move(ip), static_cast<std::uint16_t>(port == 0 ? default_comm_port : port),
          std::move(label)};
}

mem_kind kind_of(int v) {
  if (v < 0 || v >= static_cast<int>(mem_kind_count))
    raise(status::invalid_param,
          "memory type {} is not a NIXL segment type; use DRAM_SEG, VRAM_SEG, BLK_SEG, OBJ_SEG "
          "or FILE_SEG",
          v);
  return static_cast<mem_kind>(v);
}

// Construction and teardown

agent::agent(const std::string& name, const config& c) {
  if (name.empty()) throw std::invalid_argument("nixlAgent: the agent name is empty");
  if (c.listen_port < 0 || c.listen_port > 65535)
    raise(status::invalid_param, "nixlAgentConfig: listenPort {} is not a TCP port", c.listen_port);
  agent_config cfg;
  cfg.enable_prog_thread = c.prog_thread;
  cfg.sync = c.sync;
  cfg.capture_telemetry = c.capture_telemetry;
  cfg.progress_delay = c.progress_delay;
  cfg.xfer_stall_timeout = c.xfer_stall_timeout;
  agent_ = std::make_unique<agent_t>(name, std::move(cfg));
#if defined(NIXL_HAS_METADATA)
  metadata::config mc;
  mc.listen = c.listen_thread;
  mc.listen_port = static_cast<std::uint16_t>(c.listen_port);
  mc.listen_address = c.listen_address;
  mc.metadata_secret = c.metadata_secret;
  mc.etcd_watch_timeout = c.etcd_watch_timeout;
  exchange_ = std::make_unique<metadata::exchange>(*agent_, std::move(mc));
#else
  if (c.listen_thread)
    throw nixl::error(status::not_supported,
                      "nixlAgent: useListenThread needs the metadata exchange; build with "
                      "NIXL_WITH_METADATA=ON");
#endif
}

agent::~agent() {
  // Requests and prepared lists point into the agent, and the exchange's threads call it: all
  // go before the agent.
  requests.clear();
  lists.clear();
#if defined(NIXL_HAS_METADATA)
  exchange_.reset();
#endif
  agent_.reset();
}

const std::string& agent::name() const noexcept {
  return agent_->name();
}

// Backends

std::vector<std::string> agent::available_backends() {
  std::vector<std::string> out;
  for (auto n : agent_t::available_backends()) out.emplace_back(n);
  return out;
}

const backend& agent::create_backend(std::string_view name, const params& p) {
  agent_->create_backend(name, p);
  const auto* b = find_backend(name);
  if (b == nullptr) raise(status::not_found, "create_backend: backend {} was not created", name);
  return *b;
}

const backend* agent::find_backend(std::string_view name) {
  std::lock_guard g(backends_mutex_);
  for (const auto& b : backends_)
    if (b->name == name) return b.get();
  if (!agent_->has_backend(name)) return nullptr;
  backends_.push_back(std::make_unique<backend>(capabilities(agent_t::backend_types{}, name)));
  return backends_.back().get();
}

bool agent::owns(const backend* b) const noexcept {
  std::lock_guard g(backends_mutex_);
  for (const auto& p : backends_)
    if (p.get() == b) return true;
  return false;
}

const backend& agent::checked(const void* b) const {
  const auto* p = static_cast<const backend*>(b);
  if (b == nullptr || !owns(p))
    raise(status::invalid_param,
          "backend handle {} is not a backend of agent '{}'; use the handle its createBackend "
          "gave",
          b, name());
  return *p;
}

backend_options agent::options(std::span<const backend* const> bs) const {
  backend_options o;
  o.backends.reserve(bs.size());
  for (const auto* b : bs) o.backends.push_back(checked(b).name);
  return o;
}

// Handles

std::shared_ptr<prepared> agent::list_at(const void* h) const {
  auto p = lists.find(h);
  if (!p) raise(status::invalid_param, "prepared list handle {} is unknown or released", h);
  return p;
}

std::shared_ptr<request> agent::request_at(const void* h) const {
  auto r = requests.find(h);
  if (!r) raise(status::invalid_param, "transfer handle {} is unknown or released", h);
  return r;
}

status agent::release(request& r) {
  const auto s = r.req.release();
  if (s == status::repost_active) return s;
  requests.drop(&r);
  return status::success;
}

// Metadata exchange

std::uint16_t agent::listen_port() const noexcept {
#if defined(NIXL_HAS_METADATA)
  return exchange_->port();
#else
  return 0;
#endif
}

void agent::no_exchange(std::string_view call) {
  raise(status::not_supported,
        "{}: this build has no metadata exchange; build with NIXL_WITH_METADATA=ON", call);
}

}  // namespace nixl::runtime
