// nixl::metadata::exchange: config, and the calls that route to the peer-to-peer part
// (listener.cpp) or the central store (central.cpp).
#include <nixl/metadata/exchange.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <nixl/status.hpp>

#include "central.hpp"
#include "common.hpp"
#include "listener.hpp"
#include "socket.hpp"
#include "tcpstore.hpp"

namespace nixl::metadata {

config config::resolved() const {
  config c = *this;
  if (c.read_env) {
    if (c.listen_address.empty()) {
      if (const char* a = std::getenv("NIXL_LISTEN_ADDRESS")) c.listen_address = a;
    }
    if (c.etcd_endpoints.empty()) {
      if (const char* e = std::getenv("NIXL_ETCD_ENDPOINTS")) c.etcd_endpoints = e;
    }
    if (c.etcd_namespace.empty()) {
      if (const char* n = std::getenv("NIXL_ETCD_NAMESPACE")) c.etcd_namespace = n;
    }
    if (c.metadata_secret.empty()) {
      if (const char* k = std::getenv("NIXL_METADATA_SECRET")) c.metadata_secret = k;
    }
    detail::tcpstore_env(c);
  }
  if (c.listen_address.empty()) c.listen_address = std::string(default_listen_address);
  detail::check_listen_address(c.listen_address);
  while (!c.etcd_namespace.empty() && c.etcd_namespace.back() == '/') c.etcd_namespace.pop_back();
  if (c.etcd_namespace.empty()) c.etcd_namespace = "/nixl/agents";
  return c;
}

bool config::runs_threads() const {
  auto r = resolved();
  return listen || !r.etcd_endpoints.empty() || !r.tcpstore_endpoint.empty();
}

struct exchange::impl {
  detail::context ctx;
  bool threaded = false;
  std::unique_ptr<detail::listener> p2p;
  std::unique_ptr<detail::central_store> central;
  std::unique_ptr<detail::tcpstore_store> tcpstore;
};

exchange::exchange(std::string agent_name, config cfg, hooks h) : impl_(std::make_unique<impl>()) {
  auto& m = *impl_;
  m.ctx.name = std::move(agent_name);
  m.ctx.cfg = cfg.resolved();
  m.ctx.h = std::move(h);
  const auto& c = m.ctx.cfg;
  if (!m.ctx.h.full_metadata || !m.ctx.h.load || !m.ctx.h.invalidate) {
    nixl::raise(status::invalid_param, "metadata exchange of '{}': every hook must be set",
                m.ctx.name);
  }
  if (c.max_frame == 0 || c.max_frame > std::numeric_limits<std::uint32_t>::max()) {
    nixl::raise(status::invalid_param,
                "metadata exchange of '{}': max_frame {} must be in 1..4294967295", m.ctx.name,
                c.max_frame);
  }
  detail::tcpstore_check(c);
  m.threaded = c.listen || !c.etcd_endpoints.empty() || !c.tcpstore_endpoint.empty();
  // Peer requests of a threaded exchange run on the listener's I/O thread, even without a
  // listening socket.
  m.p2p = std::make_unique<detail::listener>(m.ctx, m.threaded);
  if (!c.etcd_endpoints.empty()) m.central = std::make_unique<detail::central_store>(m.ctx);
  if (!c.tcpstore_endpoint.empty()) m.tcpstore = std::make_unique<detail::tcpstore_store>(m.ctx);
}

exchange::~exchange() {
  // The etcd thread first, then the I/O thread; both before the context they read goes away.
  impl_->central.reset();
  impl_->tcpstore.reset();
  impl_->p2p.reset();
}

const std::string& exchange::agent_name() const noexcept {
  return impl_->ctx.name;
}
std::uint16_t exchange::port() const noexcept {
  return impl_->p2p->port();
}
bool exchange::runs_threads() const noexcept {
  return impl_->threaded;
}
bool exchange::has_central() const noexcept {
  return impl_->central != nullptr || impl_->tcpstore != nullptr;
}
const config& exchange::settings() const noexcept {
  return impl_->ctx.cfg;
}

std::future<void> exchange::send(std::string_view ip, std::uint16_t port, std::string blob) {
  return impl_->p2p->send_frame("send_local_metadata", ip, port, frame_type::load, blob);
}

std::future<void> exchange::fetch(std::string_view ip, std::uint16_t port,
                                  std::string_view expected_agent) {
  return impl_->p2p->send_frame("fetch_remote_metadata", ip, port, frame_type::fetch,
                                expected_agent);
}

std::future<void> exchange::invalidate_at(std::string_view ip, std::uint16_t port) {
  return impl_->p2p->send_frame("invalidate_local_metadata", ip, port, frame_type::invalidate,
                                impl_->ctx.name);
}

namespace {
[[noreturn]] void no_central(std::string_view call) {
  nixl::raise(status::not_supported,
              "{}: no central metadata store; set NIXL_ETCD_ENDPOINTS (etcd) or "
              "NIXL_TCPSTORE_ENDPOINT (TCPStore), or give the peer's ip and port",
              call);
}
}  // namespace

std::future<void> exchange::publish(std::string_view label, std::string blob) {
  if (impl_->tcpstore) return impl_->tcpstore->publish(label, std::move(blob));
  if (!impl_->central) no_central("send_local_metadata");
  return impl_->central->publish(label, std::move(blob));
}

std::future<void> exchange::fetch_central(std::string_view agent, std::string_view label) {
  if (impl_->tcpstore) return impl_->tcpstore->fetch(agent, label);
  if (!impl_->central) no_central("fetch_remote_metadata");
  return impl_->central->fetch(agent, label);
}

std::future<void> exchange::unpublish() {
  if (impl_->tcpstore) return impl_->tcpstore->unpublish();
  if (!impl_->central) no_central("invalidate_local_metadata");
  return impl_->central->unpublish();
}

void exchange::central_or_throw(std::string_view call) const {
  if (!has_central())
    nixl::raise(status::invalid_param,
                "{}: no ip given and no central store; give the peer's ip and port, or set "
                "NIXL_ETCD_ENDPOINTS or NIXL_TCPSTORE_ENDPOINT",
                call);
}

std::future<void> exchange::send_local_metadata(const target& t) {
  std::string blob = impl_->ctx.h.full_metadata();
  if (t.is_peer()) return send(t.ip, t.port, std::move(blob));
  central_or_throw("send_local_metadata");
  return publish(t.label.empty() ? full_label : t.label, std::move(blob));
}

std::future<void> exchange::send_partial_metadata(const reg_dlist& descs, bool include_conn_info,
                                                  const target& t, const backend_options& opt) {
  if (!t.is_peer() && t.label.empty())
    nixl::raise(status::invalid_param,
                "send_partial_metadata: the central store needs a label for partial metadata; "
                "set metadata::target::label");
  if (!impl_->ctx.h.partial_metadata)
    nixl::raise(status::not_supported,
                "send_partial_metadata: this exchange has no partial_metadata hook; build it "
                "from an agent (exchange{{agent, config}})");
  std::string blob = impl_->ctx.h.partial_metadata(descs, include_conn_info, opt);
  if (t.is_peer()) return send(t.ip, t.port, std::move(blob));
  central_or_throw("send_partial_metadata");
  return publish(t.label, std::move(blob));
}

std::future<void> exchange::fetch_remote_metadata(std::string_view remote, const target& t) {
  if (remote == impl_->ctx.name)
    nixl::raise(status::invalid_param, "fetch_remote_metadata: '{}' is this agent itself", remote);
  if (t.is_peer()) return fetch(t.ip, t.port, remote);
  central_or_throw("fetch_remote_metadata");
  return fetch_central(remote, t.label.empty() ? full_label : t.label);
}

std::future<void> exchange::invalidate_local_metadata(const target& t) {
  if (t.is_peer()) return invalidate_at(t.ip, t.port);
  central_or_throw("invalidate_local_metadata");
  return unpublish();
}

listener_stats exchange::stats() const noexcept {
  return impl_->p2p->stats();
}

std::string exchange::central_key(std::string_view agent, std::string_view label) const {
  if (impl_->tcpstore) return impl_->tcpstore->key(agent, label);
  return fmt::format("{}/{}/{}", impl_->ctx.cfg.etcd_namespace, agent, label);
}

}  // namespace nixl::metadata
