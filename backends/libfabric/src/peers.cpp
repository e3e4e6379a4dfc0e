// Peers: connection info into the address vectors, their regions, liveness, notifications;
// and the backend's own calls that forward to the engine.

#include <chrono>
#include <thread>

#include <nixl/detail/codec.hpp>
#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::libfabric {

namespace detail {

peer_state* engine::load_peer(std::string_view name, std::span<const std::byte> info) {
  const wire::conn_record rec = wire::parse_conn_info(name, info, config::max_rails);
  if (rec.provider != provider_)
    raise(status::mismatch,
          "LIBFABRIC load_peer '{}': the peer uses provider '{}', this agent '{}'; choose the "
          "same provider on both (parameter `provider` or FI_PROVIDER)",
          name, rec.provider, provider_);
  // An address is read by the provider at the length its format implies: check it first.
  for (std::size_t j = 0; j < rec.addresses.size(); ++j) {
    const std::string_view a = rec.addresses[j];
    const rail& r = *rails_[j % rails_.size()];
    const bool ok =
        r.info->addr_format == FI_ADDR_STR ? a.back() == '\0' : a.size() == r.address.size();
    if (!ok)
      raise(status::mismatch,
            "LIBFABRIC load_peer '{}': address of rail {} has {} bytes, this provider's have {}",
            name, j, a.size(), r.address.size());
  }
  // An engine of this process: its life says when it may be addressed; one destroyed already
  // must not be inserted (its address would reach freed memory, see local_life).
  bool gone = false;
  std::shared_ptr<local_life> local = find_local(rec.uid, gone);
  if (gone)
    raise(status::remote_disconnect,
          "LIBFABRIC load_peer '{}': that agent's backend in this process was destroyed; load the "
          "metadata of a live agent",
          name);
  auto p = std::make_unique<peer_state>();
  p->name = std::string(name);
  p->local = std::move(local);
  p->uid = rec.uid;
  p->remote_rails = rec.addresses.size();
  p->last_seen_ns.store(now_ns(), std::memory_order_relaxed);
  p->contact_deadline_ns = p->last_seen_ns.load(std::memory_order_relaxed) +
                           std::chrono::nanoseconds(engine::contact_wait).count();
  p->contact.store(uid_ < rec.uid);
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    rail& r = *rails_[i];
    const std::string_view a = rec.addresses[i % rec.addresses.size()];
    fi_addr_t fa = FI_ADDR_UNSPEC;
    int n;
    {
      std::lock_guard lk(r.mu);
      n = fi_av_insert(r.av, a.data(), 1, &fa, 0, nullptr);
    }
    if (n != 1)
      raise(status::mismatch, "LIBFABRIC load_peer '{}': rail {} refuses the peer's address: {}",
            name, r.domain_name, fi_strerror(n < 0 ? -n : FI_EINVAL));
    p->addr.push_back(fa);
  }
  std::lock_guard lk(peers_mu_);
  if (!p->contact.load()) awaiting_contact_.fetch_add(1);
  p->token = peers_.size();
  peers_.push_back(std::move(p));
  note_gone(name, false);
  return peers_.back().get();
}

void engine::unload_peer(peer_state* p) noexcept {
  if (p == nullptr || p->is_self) return;
  {
    std::lock_guard lk(peers_mu_);
    p->closed = true;  // kept until destruction: requests may still point at it
  }
  // The peer watches this agent by its pings: told that they stop, it does not take the
  // silence for an end. Not when the agent itself ends (its peers are to learn that).
  if (closing_.load(std::memory_order_acquire) || p->failed.load() || !may_send(p)) return;
  try {
    send_ctrl(p->addr[0], p, p->local.get(), wire::encode_header(wire::msg_type::bye, uid_));
  } catch (...) {  // out of memory: the peer finds this agent silent and gone
  }
}

void engine::gone_agents(std::vector<std::string>& out) {
  if (!thread_.joinable()) progress();
  gone_.append(out);
}

void engine::notify(peer_state* p, std::string_view msg) {
  if (p->failed.load())
    raise(status::remote_disconnect, "LIBFABRIC notify: peer '{}' failed", p->name);
  if (msg.size() > cfg_.max_notif_size)
    raise(status::invalid_param, "LIBFABRIC notify: {} bytes; the limit is max_notif_size={}",
          msg.size(), cfg_.max_notif_size);
  const std::string bytes = text_message(false, msg);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!may_send(p) || !send_ctrl(p->addr[0], p, p->local.get(), bytes)) {
    if (p->failed.load())
      raise(status::remote_disconnect, "LIBFABRIC notify: peer '{}' failed", p->name);
    if (std::chrono::steady_clock::now() > until)
      raise(status::backend, "LIBFABRIC notify to '{}': no send buffer came free within 1 s",
            p->name);
    progress();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

bool engine::may_send(peer_state* p) noexcept {
  if (p->contact.load(std::memory_order_acquire)) return true;
  if (now_ns() < p->contact_deadline_ns) return false;
  if (!p->contact.exchange(true, std::memory_order_acq_rel)) awaiting_contact_.fetch_sub(1);
  return true;
}

std::string engine::text_message(bool abort, std::string_view msg) const {
  nixl::detail::writer w;
  w.raw(wire::encode_header(abort ? wire::msg_type::abort : wire::msg_type::notif, uid_));
  w.u16(static_cast<std::uint16_t>(agent_name_.size()));
  w.raw(agent_name_);
  w.raw(msg);
  return w.take();
}

void engine::take_notifications(notif_map& out) {
  inbox_.take(nixl::detail::notif_inbox::kind::notification, out);
}

void engine::take_aborts(notif_map& out) {
  inbox_.take(nixl::detail::notif_inbox::kind::abort, out);
}

}  // namespace detail

backend::backend(const config& cfg, const backend_context& ctx)
    : eng_(std::make_unique<detail::engine>(cfg, ctx)) {}

backend::peer backend::self_peer() {
  return peer(eng_->self());
}

backend::remote_region backend::load_local(const region& r) {
  remote_region rr;
  rr.range = r.range;
  rr.kind = r.kind;
  rr.peer = eng_->self();
  rr.base = r.range.addr;
  rr.virt_addr = eng_->virt_addr();
  rr.keys = r.mr.keys;
  return rr;
}

void backend::unload_region(remote_region& r) noexcept {
  r.keys.clear();
  r.peer = nullptr;
}

std::string backend::connection_info() const {
  return eng_->connection_info();
}

std::uint64_t backend::incarnation(std::span<const std::byte> conn_info) noexcept {
  try {
    return detail::wire::parse_conn_info("?", conn_info, config::max_rails).uid;
  } catch (...) {
    return 0;
  }
}

backend::peer backend::load_peer(std::string_view agent, std::span<const std::byte> conn_info) {
  return peer(eng_->load_peer(agent, conn_info));
}

void backend::unload_peer(peer& p) noexcept {
  eng_->unload_peer(p.state);
  p.state = nullptr;
}

backend::remote_region backend::unpack(peer& p, mem_kind kind, const desc& d,
                                       std::span<const std::byte> data) {
  if (p.state == nullptr) raise(status::invalid_param, "LIBFABRIC unpack: no peer");
  const detail::wire::rkey_record rec = detail::wire::parse_rkey(data, config::max_rails);
  if (kind != rec.kind)
    raise(status::mismatch, "LIBFABRIC unpack: region of '{}' is {} memory, its data says {}",
          p.state->name, to_string(kind), to_string(rec.kind));
  if (rec.keys.size() != p.state->remote_rails)
    raise(status::mismatch, "LIBFABRIC unpack: region of '{}' has {} keys for {} rails",
          p.state->name, rec.keys.size(), p.state->remote_rails);
  if (rec.base != d.addr || rec.len != d.len)
    raise(status::mismatch, "LIBFABRIC unpack: region {:#x}+{} of '{}' carries data for {:#x}+{}",
          d.addr, d.len, p.state->name, rec.base, rec.len);
  if (rec.virt_addr != eng_->virt_addr())
    raise(status::mismatch, "LIBFABRIC unpack: region of '{}' uses {} addressing, this provider {}",
          p.state->name, rec.virt_addr ? "virtual" : "offset",
          eng_->virt_addr() ? "virtual" : "offset");
  remote_region rr;
  rr.range = d;
  rr.kind = kind;
  rr.peer = p.state;
  rr.base = rec.base;
  rr.virt_addr = rec.virt_addr;
  rr.keys = rec.keys;
  return rr;
}

void backend::notify(peer& p, std::string_view msg) {
  if (p.state == nullptr) raise(status::invalid_param, "LIBFABRIC notify: no peer");
  eng_->notify(p.state, msg);
}

void backend::take_notifications(notif_map& out) {
  eng_->take_notifications(out);
}

void backend::take_aborts(notif_map& out) {
  eng_->take_aborts(out);
}

void backend::gone_agents(std::vector<std::string>& out) {
  eng_->gone_agents(out);
}

std::uint64_t backend::gone_events() const noexcept {
  return eng_->gone_events();
}

void backend::agent_closing() noexcept {
  eng_->agent_closing();
}

std::vector<std::string> backend::rails() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < eng_->num_rails(); ++i) out.push_back(eng_->rail_at(i).domain_name);
  return out;
}

}  // namespace nixl::libfabric
