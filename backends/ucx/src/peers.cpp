// The UCX backend's peers: loading and unloading remote agents (and this agent, for loopback)
// and their regions, watching whether they are alive, and notifications.

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx {
namespace detail {

namespace {
constexpr std::string_view backend_destroyed = "its backend was destroyed";

#if UCP_API_VERSION >= UCP_VERSION(1, 14)
constexpr bool hello_supported = true;  // a peer of this host is sent a hello (load_peer)
#else
constexpr bool hello_supported = false;
#endif
// A hello's connection info at most (one address and the record's fields), and the whole
// message at most (with the sender's name and the notification framing).
constexpr std::size_t max_hello_info_size = wire::max_address_size + 1024;
constexpr std::size_t max_hello_size = engine::max_name_size + max_hello_info_size;

// One of the endpoint's lanes is the UCX transport `tl` (e.g. "tcp", "cma"). UCX chooses an
// endpoint's lanes when it is made from the peer's worker address, so the answer holds from
// then on. False where the UCX library cannot say (its API before 1.14, or a runtime that does
// not know the query).
bool has_lane(ucp_ep_h ep, std::string_view tl) noexcept {
#if UCP_API_VERSION >= UCP_VERSION(1, 14)
  std::array<ucp_transport_entry_t, 32> entries{};
  ucp_ep_attr_t a{};
  a.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
  a.transports.entries = entries.data();
  a.transports.num_entries = static_cast<unsigned>(entries.size());
  a.transports.entry_size = sizeof(ucp_transport_entry_t);
  if (ucp_ep_query(ep, &a) != UCS_OK) return false;
  const unsigned n = std::min<unsigned>(a.transports.num_entries, entries.size());
  for (unsigned i = 0; i < n; ++i) {
    const char* t = entries[i].transport_name;
    if (t != nullptr && std::string_view(t).substr(0, tl.size()) == tl) return true;
  }
#else
  (void)ep;
  (void)tl;
#endif
  return false;
}
}  // namespace

void engine::connect_self() {
  // loopback endpoints: each worker to itself
  auto self = std::make_unique<peer_state>();
  self->name = agent_name_;
  self->is_self = true;
  self->owner = this;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses_[i].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ucp_ep_h h = nullptr;
    const ucs_status_t s = ucp_ep_create(workers_[i].get(), &ep, &h);
    if (s != UCS_OK) {
      for (ucp_ep_h e : self->eps) {
        ucp_request_param_t cp{};
        cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t r = ucp_ep_close_nbx(e, &cp);
        if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
      }
      throw_ucs(s, "ucp_ep_create", __FILE__, __LINE__, "loopback endpoint");
    }
    self->eps.push_back(h);
    self->tcp_lane.push_back(has_lane(h, "tcp") ? 1 : 0);
  }
  self_ = self.get();
  peers_.push_back(std::move(self));
}

void engine::probe(peer_state* p) noexcept {
  if (p->local_alive) {
    if (!p->local_alive->load(std::memory_order_acquire)) mark_failed(p, backend_destroyed);
    return;
  }
  const std::int64_t now = now_ns();
  if (now < p->next_probe_ns.load(std::memory_order_relaxed)) return;
  p->next_probe_ns.store(now + 10'000'000, std::memory_order_relaxed);  // at most every 10 ms
  pollfd pf{p->pidfd, POLLIN, 0};
  if (::poll(&pf, 1, 0) > 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR)) != 0)
    mark_failed(p, "process exited");
}

void engine::mark_failed(peer_state* p, std::string_view why) noexcept {
  // A peer whose backend was destroyed left normally (a teardown): no warning. An agent of
  // this process marks itself gone before it closes its endpoints, so whatever failure that
  // close causes here (a TCP lane's reset) is its teardown too.
  if (p->local_alive && !p->local_alive->load(std::memory_order_acquire)) why = backend_destroyed;
  const auto lv = why == backend_destroyed ? log::level::info : log::level::warn;
  if (!p->failed.exchange(true, std::memory_order_acq_rel)) {
    if (p->sender_only)  // nothing of this agent fails with it: an event, not a warning
      log::info("UCX: agent '{}', which sent to this one, is gone ({})", p->name, why);
    else
      log::write(lv,
                 "UCX: peer '{}' is gone ({}); its requests end with NIXL_ERR_REMOTE_DISCONNECT",
                 p->name, why);
    if (!p->is_self && !p->closing.load(std::memory_order_acquire)) note_gone(p->name, true);
  }
  fail_copies_of(p);
  if (waker_ != nullptr) waker_->notify();  // its requests end now
}

void engine::on_ep_error(void* arg, ucp_ep_h, ucs_status_t st) noexcept {
  auto* p = static_cast<peer_state*>(arg);
  p->owner->mark_failed(p, ucs_status_string(st));
}

ucs_status_t engine::on_notif(void* arg, const void*, std::size_t, void* data, std::size_t len,
                              const ucp_am_recv_param_t* param) noexcept {
  return static_cast<engine*>(arg)->receive(data, len, param, false);
}

ucs_status_t engine::on_abort(void* arg, const void*, std::size_t, void* data, std::size_t len,
                              const ucp_am_recv_param_t* param) noexcept {
  return static_cast<engine*>(arg)->receive(data, len, param, true);
}

ucs_status_t engine::receive(const void* data, std::size_t len, const ucp_am_recv_param_t* param,
                             bool abort) noexcept {
  const char* what = abort ? "an abort notice" : "a notification";
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    log::warn("UCX: dropped {} sent by rendezvous (not from a NIXL UCX agent)", what);
    return UCS_OK;
  }
  const auto got = wire::parse_notif(std::string_view(static_cast<const char*>(data), len),
                                     max_name_size, max_notif_size);
  if (!got) {
    log::warn("UCX: dropped {} of {} bytes: malformed", what, len);
    return UCS_OK;
  }
  using kind = nixl::detail::notif_inbox::kind;
  if (!inbox_.push(abort ? kind::abort : kind::notification, got->sender, got->message)) {
    log::error("UCX: out of memory storing {}; dropped", what);
    return UCS_OK;
  }
  if (waker_ != nullptr) waker_->notify();
  return UCS_OK;
}

ucs_status_t engine::on_hello(void* arg, const void*, std::size_t, void* data, std::size_t len,
                              const ucp_am_recv_param_t* param) noexcept {
  auto* e = static_cast<engine*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 || len > max_hello_size) {
    log::warn("UCX: dropped a hello message of {} bytes (not from a NIXL UCX agent)", len);
    return UCS_OK;
  }
  try {
    std::lock_guard lk(e->hello_mu_);
    if (e->hellos_.size() >= max_hellos_queued) return UCS_OK;  // the next pass takes them
    e->hellos_.emplace_back(static_cast<const char*>(data), len);
    e->hellos_pending_.store(true, std::memory_order_release);
  } catch (...) {  // out of memory: that sender is not watched
  }
  return UCS_OK;
}

void engine::adopt_senders() noexcept {
  if (!hellos_pending_.exchange(false, std::memory_order_acq_rel)) return;
  std::vector<std::string> got;
  {
    std::lock_guard lk(hello_mu_);
    got.swap(hellos_);
  }
  for (const std::string& h : got) {
    try {
      watch_sender(h);
    } catch (const std::exception& ex) {
      log::warn("UCX: dropped a hello message: {}", ex.what());
    }
  }
}

void engine::watch_sender(std::string_view hello) {
  const auto got = wire::parse_notif(hello, max_name_size, max_hello_info_size);
  if (!got) raise(status::mismatch, "malformed ({} bytes)", hello.size());
  const std::string_view name = got->sender;
  const wire::conn_record rec = wire::parse_conn_info(name, got->message);
  if (cfg_.error_handling == error_mode::none) return;
  const bool same_process = nixl::detail::same_process(id_, rec.id);
  if (same_process && rec.uid == uid_) return;  // this backend itself
  // sender watches to close: earlier processes under that name, and those found gone (their
  // pidfds go back here, on the next hello)
  std::vector<peer_state*> older;
  {
    std::lock_guard lk(peers_mu_);
    std::size_t senders = 0;
    for (auto& p : peers_) {
      if (p->closed || p->is_self) continue;
      if (p->name == name && p->token == rec.id.token && p->uid == rec.uid)
        return;  // loaded or watched already
      if (!p->sender_only) continue;
      if (p->name == name || p->gone()) {
        older.push_back(p.get());  // an earlier process of that name, or one found gone: closed
        continue;
      }
      ++senders;
    }
    if (senders >= max_senders) {
      if (!senders_full_logged_.exchange(true))
        log::warn("UCX: {} agents that sent to this one are watched already; '{}' is not",
                  max_senders, name);
      return;
    }
  }
  for (peer_state* o : older) unload_peer(o);
  auto p = std::make_unique<peer_state>();
  p->name = std::string(name);
  p->owner = this;
  p->sender_only = true;
  p->token = rec.id.token;
  p->uid = rec.uid;
  // Of this host only (another host sends no hello): an endpoint back to the sender, made
  // while the sender's endpoints to this worker were being wired up, crashed UCX 1.22's TCP
  // transport (docs/ucx.md).
  if (same_process)
    watch_local(p.get(), rec.uid);
  else if (!nixl::detail::same_host(id_, rec.id))
    raise(status::mismatch, "'{}' is on another host", name);
  else if (!open_pidfd(p.get(), rec.id))
    return;
  peer_state* raw = p.get();
  {
    std::lock_guard lk(peers_mu_);
    add_pidfd_watch(raw);
    peers_.push_back(std::move(p));
  }
  log::debug("UCX: watching '{}' (pid {}), which sent to this agent", name, rec.id.pid);
  if (raw->failed.load()) {  // gone before it was watched
    log::info("UCX: agent '{}', which sent to this one, is gone (process exited)", name);
    note_gone(name, true);
  } else {
    note_gone(name, false);
  }
}

void engine::watch_local(peer_state* p, std::uint64_t uid) noexcept {
  auto& reg = local_registry::get();
  std::lock_guard lk(reg.mu);
  auto it = reg.live.find(uid);
  std::shared_ptr<std::atomic<bool>> alive = it == reg.live.end() ? nullptr : it->second.lock();
  if (alive)
    p->local_alive = std::move(alive);
  else
    p->failed.store(true);  // that backend is gone already
}

bool engine::open_pidfd(peer_state* p, const nixl::detail::host_identity& id) noexcept {
  const long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(id.pid), 0u);
  if (fd >= 0) {
    p->pidfd = static_cast<int>(fd);
    ::fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
    // a recycled pid belongs to another process: the peer is already gone
    if (nixl::detail::process_start_time(id.pid) != id.start_time) p->failed.store(true);
    return true;
  }
  if (errno == ESRCH) {
    p->failed.store(true);
    return true;
  }
  log::warn("UCX: pidfd_open({}) for '{}' failed: {}", id.pid, p->name, std::strerror(errno));
  return false;
}

ucs_status_t engine::open_watch_ep(peer_state* p, std::string_view address) noexcept {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &engine::on_ep_error;
  ep.err_handler.arg = p;
  if (const ucs_status_t s = ucp_ep_create(workers_[0].get(), &ep, &p->watch_ep); s != UCS_OK) {
    p->watch_ep = nullptr;
    return s;
  }
  // Starts the watch endpoint's wire-up now, so that a peer that dies before the first
  // request is still seen.
  ucp_request_param_t fp{};
  fp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  fp.cb.send = [](void* r, ucs_status_t, void*) noexcept { ucp_request_free(r); };
  (void)ucp_ep_flush_nbx(p->watch_ep, &fp);
  return UCS_OK;
}

// Under peers_mu_.
void engine::add_pidfd_watch(peer_state* p) noexcept {
  if (p->pidfd < 0 || !thread_.joinable()) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = p;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, p->pidfd, &ev) != 0)
    log::warn("UCX: cannot watch the process of '{}': {}", p->name, std::strerror(errno));
}

void engine::send_beat(peer_state* p, bool bye) noexcept {
  // as a post of the progress thread: not once its endpoints are closing (close_eps)
  p->handed_posting.fetch_add(1, std::memory_order_seq_cst);
  if (!p->no_posts.load(std::memory_order_seq_cst) && !p->failed.load(std::memory_order_acquire)) {
    try {
      auto msg = std::make_unique<std::string>(bye ? wire::encode_beat(notif_prefix_, 0) : beat_);
      ucs_status_t st = UCS_OK;
      if (send_owned(p->eps[0], beat_am_id, msg, st) &&
          std::this_thread::get_id() != thread_.get_id())
        kick(0);
    } catch (...) {  // out of memory: this one is not sent
    }
  }
  p->handed_posting.fetch_sub(1, std::memory_order_seq_cst);
}

void engine::send_beats(std::int64_t now) noexcept {
  if (now < next_beat_ns_) return;
  // the thread's longest sleep may exceed the period: the beats then go that often
  next_beat_ns_ = now + beat_every_ns();
  std::vector<peer_state*> to;
  try {
    std::lock_guard lk(peers_mu_);
    for (auto& up : peers_)
      if (up->beats && !up->closed && !up->failed.load(std::memory_order_relaxed))
        to.push_back(up.get());
  } catch (...) {
    return;
  }
  // peer states stay until the engine goes: the pointers outlive the lock
  for (peer_state* p : to) send_beat(p, false);
}

ucs_status_t engine::on_beat(void* arg, const void*, std::size_t, void* data, std::size_t len,
                             const ucp_am_recv_param_t* param) noexcept {
  auto* e = static_cast<engine*>(arg);
  const auto got =
      (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0
          ? std::nullopt
          : wire::parse_beat(std::string_view(static_cast<const char*>(data), len), max_name_size);
  if (!got) {
    log::warn("UCX: dropped a beat message of {} bytes (not from a NIXL UCX agent)", len);
    return UCS_OK;
  }
  e->note_beat(got->sender, got->period_ms);
  return UCS_OK;
}

void engine::note_beat(std::string_view name, std::uint32_t period_ms) noexcept {
  bool back = false, was_gone = false;
  try {
    std::lock_guard lk(beats_mu_);
    auto it = beats_.find(name);
    if (period_ms == 0) {  // a bye
      if (it != beats_.end()) {
        log::debug("UCX: '{}' unloaded this agent; no longer watched", name);
        beats_.erase(it);
      }
      return;
    }
    if (it == beats_.end()) {
      if (beats_.size() >= max_senders) return;
      it = beats_.emplace(std::string(name), nixl::detail::silence_watch{}).first;
      back = true;
    }
    was_gone = it->second.heard(now_ns(),
                                nixl::detail::silence_watch::limit(cfg_.peer_timeout, period_ms));
    back |= was_gone;
  } catch (...) {  // out of memory: not watched
    return;
  }
  if (was_gone) log::info("UCX: agent '{}', which sends to this one, is back", name);
  if (back) note_gone(name, false);
}

void engine::judge_beats(std::int64_t now) noexcept {
  std::vector<std::pair<std::string, std::int64_t>> found;  // name, its limit
  try {
    std::lock_guard lk(beats_mu_);
    const std::int64_t gap = last_judge_ns_ == 0 ? 0 : now - last_judge_ns_;
    last_judge_ns_ = now;
    const std::int64_t period = beat_every_ns();
    for (auto& [name, w] : beats_) {
      if (gap > period) w.discount(gap, now);  // this side did not run
      if (!w.silent(now)) continue;
      w.gone = true;
      found.emplace_back(name, w.limit_ns);
    }
  } catch (...) {  // out of memory: judged at the next pass
    return;
  }
  for (const auto& [name, limit] : found) {
    log::info("UCX: agent '{}', which sent to this one, is gone (no beat from it within {} ms)",
              name, limit / 1'000'000);
    note_gone(name, true);
  }
}

void engine::note_gone(std::string_view name, bool gone) noexcept {
  if (gone_.note(name, gone) && waker_ != nullptr) waker_->notify();
}

void engine::gone_agents(std::vector<std::string>& out) {
  if (!thread_.joinable()) progress_all();
  gone_.append(out);
}

void engine::take_notifications(notif_map& out) {
  if (!thread_.joinable()) progress_all();
  inbox_.take(nixl::detail::notif_inbox::kind::notification, out);
}

void engine::take_aborts(notif_map& out) {
  if (!thread_.joinable()) progress_all();
  inbox_.take(nixl::detail::notif_inbox::kind::abort, out);
}

peer_state* engine::load_peer(std::string_view name, std::span<const std::byte> info) {
  const std::string_view blob(reinterpret_cast<const char*>(info.data()), info.size());
  const wire::conn_record rec = wire::parse_conn_info(name, blob);
  if (name.size() > max_name_size)
    raise(status::invalid_param, "UCX load_peer: agent name of {} bytes exceeds the limit of {}",
          name.size(), max_name_size);

  // Same kernel is not same host: containers and sandbox hosts share the boot id. Shared memory
  // and a usable pid need the same PID and IPC namespaces; another network namespace is another
  // host to the network, and UCX's own failure detection is what works there.
  const bool same_host = nixl::detail::same_host(id_, rec.id);
  const bool same_process = nixl::detail::same_process(id_, rec.id);
  auto p = std::make_unique<peer_state>();
  p->name = std::string(name);
  p->host_copies = rec.host_copies;
  p->owner = this;
  // Data endpoints in UCX mode `peer` only when asked for (`ucx_peer`); NIXL's `peer` keeps
  // them in mode `none` and sees a failure through a watch (below).
  p->ucx_peer_mode = cfg_.error_handling == error_mode::ucx_peer;
  // Two agents of one process joined by TCP alone: with mode-none endpoints UCX 1.22's TCP
  // receive path crashed (a put received into a released buffer, uct_tcp_ep_progress_put_rx)
  // in about one run in five of tests/python/test_wait.py's 16 transfers with notifications;
  // with UCX's peer mode on those endpoints it did not (docs/ucx.md).
  if (same_process && tcp_only_ && !p->ucx_peer_mode) {
    log::info(
        "UCX: '{}' is an agent of this process reached over TCP alone: its endpoints use "
        "UCX's peer error mode",
        name);
    p->ucx_peer_mode = true;
  }
  p->token = rec.id.token;
  p->uid = rec.uid;
  const bool watch = cfg_.error_handling == error_mode::peer && !same_host;
  // Another agent of this process: watch its backend.
  if (same_process && cfg_.error_handling != error_mode::none) watch_local(p.get(), rec.uid);
  // Same host, other process, no UCX peer mode: watch the process itself.
  if (cfg_.error_handling == error_mode::peer && same_host && !same_process &&
      !open_pidfd(p.get(), rec.id)) {
    log::warn("UCX: using UCX error mode peer for '{}'", name);
    p->ucx_peer_mode = true;
  }

  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const std::string_view a = rec.addresses[i % rec.addresses.size()];
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(a.data());
    ep.err_mode = p->ucx_peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = &engine::on_ep_error;
    ep.err_handler.arg = p.get();
    ucp_ep_h h = nullptr;
    const ucs_status_t s = ucp_ep_create(workers_[i].get(), &ep, &h);
    if (s != UCS_OK) {
      p->failed.store(true);
      close_eps(p.get());
      if (p->pidfd >= 0) ::close(p->pidfd);
      if (s == UCS_ERR_UNREACHABLE)
        raise(status::backend,
              "UCX load_peer('{}'): ucp_ep_create: {}: no UCX transport of this process reaches "
              "the peer ({}); {}",
              name, ucs_status_string(s), same_host ? "same host" : "another host",
              netdev_problem_.empty()
                  ? "check that both hosts have a common network and that UCX_NET_DEVICES (or "
                    "the device_list parameter) names an interface that reaches it"
                  : netdev_problem_);
      throw_ucs(s, "ucp_ep_create", __FILE__, __LINE__, fmt::format("load_peer('{}')", name));
    }
    p->eps.push_back(h);
    p->tcp_lane.push_back(has_lane(h, "tcp") ? 1 : 0);
  }
  // A process of this host (this one too) that UCX itself reaches through cma (every endpoint
  // has a cma lane): this process may write into and read from its memory, and its pid means
  // the same process here (same PID namespace).
  if (cfg_.cma_host_dram && same_host && rec.id.pid != 0 &&
      std::all_of(p->eps.begin(), p->eps.end(), [](ucp_ep_h e) { return has_lane(e, "cma"); }))
    p->cma_pid = static_cast<int>(rec.id.pid);
  // UCX's shared-memory protocol needs the target's worker progressed throughout: another
  // process that says it runs a progress thread (an agent of this process may be progressed by
  // no one while this one polls its own request; a peer without the thread, only when its
  // application polls)
  p->shm = p->cma_pid != 0 && !same_process && rec.progress_thread && cfg_.shm_min_size > 0;
  if (watch) {
    if (const ucs_status_t s = open_watch_ep(p.get(), rec.addresses[0]); s != UCS_OK) {
      p->failed.store(true);
      close_eps(p.get());
      throw_ucs(s, "ucp_ep_create", __FILE__, __LINE__,
                fmt::format("load_peer('{}'): the endpoint that watches the peer", name));
    }
  }
  // The hello: a peer of this host watches this agent from now on, so that a target that never
  // loads this agent's metadata still learns its end (gone_agents).
  // Not with UCX before 1.14: there the receiver crashed in UCX's TCP transport with a hello
  // that arrived while UCX wired the endpoint up (docs/ucx.md).
  if (cfg_.error_handling != error_mode::none && same_host && hello_supported &&
      !p->failed.load() && !p->eps.empty()) {
    try {
      auto msg = std::make_unique<std::string>(hello_);
      ucs_status_t st = UCS_OK;
      if (send_owned(p->eps[0], hello_am_id, msg, st)) kick(0);
      if (st != UCS_OK) log::debug("UCX: hello to '{}' not sent: {}", name, ucs_status_string(st));
    } catch (...) {  // out of memory: the peer does not watch this agent
    }
  }

  // Across hosts the peer watches this agent by the beats of its progress thread (send_beats).
  p->beats = cfg_.error_handling != error_mode::none && !same_host && thread_.joinable() &&
             !p->eps.empty();
  if (p->beats) send_beat(p.get(), false);

  peer_state* raw = p.get();
  std::lock_guard lk(peers_mu_);
  add_pidfd_watch(raw);
  peers_.push_back(std::move(p));
  if (!raw->failed.load()) note_gone(raw->name, false);
  log::debug("UCX: loaded peer '{}' (pid {}, {}, UCX error mode {}{}{}{})", name, rec.id.pid,
             same_host ? "same host" : "other host", raw->ucx_peer_mode ? "peer" : "none",
             raw->watch_ep != nullptr ? ", watched by an endpoint in mode peer" : "",
             raw->tcp_lane.empty() || raw->tcp_lane[0] == 0 ? "" : ", a TCP lane",
             raw->cma_pid != 0 ? ", DRAM through cma calls" : "");
  return raw;
}

void engine::close_eps(peer_state* p) noexcept {
  if (p->pidfd >= 0 || p->local_alive) probe(p);
  // The progress thread's posts to the peer end before its endpoints go (they are bounded: the
  // same calls a post makes); on that thread itself none is under way.
  p->no_posts.store(true, std::memory_order_seq_cst);
  if (std::this_thread::get_id() != thread_.get_id())
    while (p->handed_posting.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  // Waits for `reqs` (freeing them), progressing every worker, until `deadline_ns` or, when
  // `until_dead`, until the peer is seen dead.
  const auto wait_all = [&](std::vector<ucs_status_ptr_t>& reqs, std::int64_t deadline_ns,
                            bool until_dead) {
    for (ucs_status_ptr_t r : reqs) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && now_ns() < deadline_ns &&
             !(until_dead && p->failed.load(std::memory_order_relaxed))) {
        for (auto& w : workers_) ucp_worker_progress(w.get());
        if (p->pidfd >= 0 || p->local_alive) probe(p);
      }
      ucp_request_free(r);
    }
    reqs.clear();
  };
  std::vector<ucs_status_ptr_t> pending;
  if (!p->failed.load(std::memory_order_acquire)) {
    // A live peer first gets what is still in flight to it, released requests included (a
    // remote flush), so that nothing of this agent lands in the peer's memory after the unload.
    for (ucp_ep_h ep : p->eps) {
      ucp_request_param_t fp{};
      ucs_status_ptr_t r = ucp_ep_flush_nbx(ep, &fp);
      if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
    }
    // The watch endpoint stays open meanwhile: a peer that dies during this flush is seen.
    wait_all(pending, now_ns() + flush_limit_ns, true);
  }
  const bool dead = p->failed.load(std::memory_order_acquire);
  p->closing.store(true, std::memory_order_release);  // no abort notice from the callbacks below
  for (std::size_t i = 0; i < p->eps.size(); ++i) {
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // UCX refuses a forced close in error mode none; such an endpoint is left to be purged when
    // the worker is destroyed.
    cp.flags = dead && p->ucx_peer_mode ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(p->eps[i], &cp);
    if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
  }
  if (p->watch_ep != nullptr) {
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags = dead ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(p->watch_ep, &cp);
    if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
    p->watch_ep = nullptr;
  }
  // The close must complete even for a dead peer: an endpoint destroyed with the worker while
  // its close is still flushing keeps its queued operations, and UCX 1.22 then aborts in
  // ucp_worker_destroy (cma endpoint: arbiter.c "ucs_arbiter_group_is_empty"). Operations to a
  // dead peer end quickly (written into memory still mapped, or failed by the kernel).
  wait_all(pending, now_ns() + 1'000'000'000, false);
  p->eps.clear();
  std::lock_guard lk(peers_mu_);  // the progress thread reads `closed` (check_local_peers)
  p->closed = true;
}

void engine::unload_peer(peer_state* p) noexcept {
  if (p == nullptr || p->is_self || p->closed) return;
  // A bye: the peer stops watching this agent rather than take the silence for an end. Not when
  // the agent itself ends (its peers are to learn that). Flushed with the endpoints below.
  if (p->beats && !closing_.load(std::memory_order_acquire)) send_beat(p, true);
  {
    std::lock_guard lk(peers_mu_);
    if (p->pidfd >= 0) {
      if (thread_.joinable()) ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p->pidfd, nullptr);
    }
  }
  close_eps(p);
  std::lock_guard lk(peers_mu_);
  if (p->pidfd >= 0) {
    ::close(p->pidfd);
    p->pidfd = -1;
  }
}

void engine::connect(peer_state* p) {
  if (p->failed.load())
    raise(status::remote_disconnect, "UCX connect('{}'): the peer is gone", p->name);
  if (p->closed) raise(status::not_found, "UCX connect('{}'): the peer was unloaded", p->name);
  const std::int64_t deadline = now_ns() + 5'000'000'000;
  for (std::size_t i = 0; i < p->eps.size(); ++i) {
    ucp_request_param_t rp{};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(p->eps[i], &rp);
    if (UCS_PTR_IS_ERR(r))
      raise(status::remote_disconnect, "UCX connect('{}'): ucp_ep_flush_nbx: {}", p->name,
            ucs_status_string(UCS_PTR_STATUS(r)));
    if (r == nullptr) continue;
    ucs_status_t s;
    while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS) {
      ucp_worker_progress(workers_[i].get());
      if (p->pidfd >= 0 || p->local_alive) probe(p);
      if (p->failed.load() || now_ns() > deadline) break;
    }
    ucp_request_free(r);
    if (s != UCS_OK && s != UCS_INPROGRESS)
      raise(status::remote_disconnect, "UCX connect('{}'): {}", p->name, ucs_status_string(s));
    if (s == UCS_INPROGRESS)
      raise(status::remote_disconnect,
            "UCX connect('{}'): no answer within 5 s; is the peer alive and progressing?", p->name);
  }
}

void engine::check_local_peers() noexcept {
  std::lock_guard lk(peers_mu_);
  for (auto& p : peers_)
    if (p->local_alive && !p->closed && !p->local_alive->load(std::memory_order_acquire))
      mark_failed(p.get(), backend_destroyed);
}

namespace {
void on_notify_done(void* request, ucs_status_t st, void* user) noexcept {
  ucp_request_free(request);
  // canceled: the endpoint was closed first (the peer unloaded), nothing to warn of
  if (st != UCS_ERR_CANCELED) warn_ucs(st, "ucp_am_send_nbx", __FILE__, __LINE__);
  delete static_cast<std::string*>(user);
}
}  // namespace

// An eager active message of `buf` on `ep`: while UCX still holds it, `buf` is handed over
// (freed by on_notify_done) and the call answers true for a kick of the worker.
bool send_owned(ucp_ep_h ep, unsigned id, std::unique_ptr<std::string>& buf,
                ucs_status_t& st) noexcept {
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;
  rp.cb.send = &on_notify_done;
  rp.user_data = buf.get();
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, id, nullptr, 0, buf->data(), buf->size(), &rp);
  st = UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : UCS_OK;
  if (r == nullptr || UCS_PTR_IS_ERR(r)) return false;
  buf.release();
  return true;
}

void engine::notify(peer_state* p, std::string_view msg) {
  if (p == nullptr || p->closed) raise(status::not_found, "UCX notify: the peer is not loaded");
  if (p->failed.load())
    raise(status::remote_disconnect, "UCX notify('{}'): the peer is gone", p->name);
  if (msg.size() > max_notif_size)
    raise(status::invalid_param, "UCX notify('{}'): message of {} bytes exceeds the limit of {}",
          p->name, msg.size(), max_notif_size);
  auto buf = std::make_unique<std::string>(notif_prefix_);
  buf->append(msg);
  ucs_status_t st = UCS_OK;
  if (send_owned(p->eps[0], notif_am_id, buf, st)) kick(0);
  if (st != UCS_OK)
    raise(to_status(st), "UCX notify('{}'): ucp_am_send_nbx: {}", p->name, ucs_status_string(st));
}

void engine::send_abort(peer_state* p, ucp_ep_h ep, std::uint32_t worker, std::string_view msg,
                        bool prefixed) noexcept {
  if (p == nullptr || ep == nullptr || p->closing.load(std::memory_order_acquire) ||
      p->failed.load(std::memory_order_acquire))
    return;
  std::unique_ptr<std::string> buf;
  try {
    buf = std::make_unique<std::string>(prefixed ? std::string_view{} : notif_prefix_);
    buf->append(msg);
  } catch (...) {
    log::warn("UCX: out of memory; the abort notice to '{}' was not sent", p->name);
    return;
  }
  ucs_status_t st = UCS_OK;
  if (send_owned(ep, abort_am_id, buf, st)) kick(worker);
  if (st != UCS_OK)
    log::debug("UCX: abort notice to '{}' not sent: {}", p->name, ucs_status_string(st));
}

std::string engine::endpoint_info(const peer_state* p) const {
  if (p == nullptr || p->eps.empty()) return {};
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* f = ::open_memstream(&buf, &len);
  if (f == nullptr) return {};
  ucp_ep_print_info(p->eps[0], f);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

}  // namespace detail

backend::peer backend::self_peer() {
  return peer(eng_->self());
}

namespace {
backend::remote_region unpack_on(detail::peer_state* p, mem_kind kind, const desc& d,
                                 std::span<const std::byte> data) {
  const detail::wire::rkey_record rec = detail::wire::parse_rkey(data);
  if (rec.kind != kind)
    raise(status::mismatch, "UCX unpack: region data of '{}' says {} but the descriptor says {}",
          p->name, to_string(rec.kind), to_string(kind));
  backend::remote_region rr;
  rr.range = d;
  rr.kind = kind;
  rr.peer = p;
  if (rec.ipc) {
    rr.ipc = std::make_shared<detail::ipc_slot>();
    rr.ipc->x = *rec.ipc;
    if (rr.ipc->x.offset > rr.ipc->x.alloc_len || d.len > rr.ipc->x.alloc_len - rr.ipc->x.offset)
      raise(status::mismatch,
            "UCX unpack: region data of '{}': a region of {} bytes at offset {} of an "
            "allocation of {} bytes",
            p->name, d.len, rr.ipc->x.offset, rr.ipc->x.alloc_len);
  }
  if (kind == mem_kind::dram && p->pidfd >= 0)
    rr.host_map = std::make_shared<detail::host_map_slot>();
  rr.rkeys.reserve(p->eps.size());
  for (ucp_ep_h ep : p->eps) {
    ucp_rkey_h rk = nullptr;
    if (const ucs_status_t s = ucp_ep_rkey_unpack(ep, rec.packed.data(), &rk); s != UCS_OK)
      raise(status::mismatch, "UCX unpack: ucp_ep_rkey_unpack for a region of '{}': {}", p->name,
            ucs_status_string(s));
    rr.rkeys.emplace_back(rk);
  }
  return rr;
}
}  // namespace

backend::remote_region backend::load_local(const region& r) {
  return unpack_on(eng_->self(), r.kind, r.range, std::as_bytes(std::span(r.public_data)));
}

void backend::unload_region(remote_region& r) noexcept {
  // the mapping of the peer's host memory goes with the rkeys: unpinned first
  if (r.host_map) {
    std::lock_guard lk(r.host_map->mu);
    if (r.host_map->base != nullptr)
      detail::gpu::unpin_range(reinterpret_cast<std::uintptr_t>(r.host_map->base), r.host_map->len);
    r.host_map->base = nullptr;
  }
  eng_->defer(r.rkeys);
}

std::string backend::connection_info() const {
  return eng_->connection_info();
}

std::uint64_t backend::incarnation(std::span<const std::byte> conn_info) noexcept {
  try {
    const std::string_view blob(reinterpret_cast<const char*>(conn_info.data()), conn_info.size());
    return detail::wire::parse_conn_info("?", blob).id.token;
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

void backend::connect(peer& p) {
  if (p.state == nullptr) raise(status::not_found, "UCX connect: the peer is not loaded");
  eng_->connect(p.state);
}

backend::remote_region backend::unpack(peer& p, mem_kind kind, const desc& d,
                                       std::span<const std::byte> data) {
  if (p.state == nullptr || p.state->closed)
    raise(status::not_found, "UCX unpack: the peer is not loaded");
  if (kind != mem_kind::dram && kind != mem_kind::vram)
    raise(status::not_supported, "UCX unpack: {} memory is not supported", to_string(kind));
  return unpack_on(p.state, kind, d, data);
}

void backend::notify(peer& p, std::string_view msg) {
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

void backend::agent_closing() noexcept {
  eng_->agent_closing();
}

std::uint64_t backend::gone_events() const noexcept {
  return eng_->gone_events();
}

std::string backend::endpoint_info(const peer& p) const {
  return eng_->endpoint_info(p.state);
}

}  // namespace nixl::ucx
