// One file above 600 lines for now: it will be split along the backend layout of
// docs/architecture.md (config, wire format, progress, registration, peers) once the concurrent
// work on the UCX backend has landed.
// Setup path of the UCX backend: context, workers, progress thread, peers, notifications.

#include <nixl/backends/ucx.hpp>

#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nixl/detail/codec.hpp>
#include <nixl/detail/params.hpp>
#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx {

namespace {

// UCX lists TCP devices from /sys/class/net. Where sysfs was mounted for another network
// namespace (`nsenter --net`, `unshare --net` without a sysfs mount, a container given the
// host's /sys), that list is not this namespace's: UCX then sees only interfaces whose names
// happen to exist in both, typically just lo, and every peer on another host is "unreachable".
// Returns a description of the mismatch, or "" when sysfs matches the interfaces we have.
std::string netdev_mismatch() {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return {};
  std::set<std::string> ours;
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    if (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)
      ours.insert(i->ifa_name);
  }
  ::freeifaddrs(ifs);
  std::error_code ec;
  std::set<std::string> listed;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/net", ec))
    listed.insert(e.path().filename().string());
  if (ec) return {};
  std::string missing;
  for (const std::string& n : ours)
    if (!listed.contains(n)) missing += (missing.empty() ? "" : ",") + n;
  if (missing.empty()) return {};
  std::string seen;
  for (const std::string& n : listed) seen += (seen.empty() ? "" : ",") + n;
  return fmt::format(
      "this network namespace has interface(s) {} that /sys/class/net (where UCX looks for "
      "devices) does not list: it lists {}, so sysfs belongs to another network namespace and "
      "UCX cannot use {} for TCP; mount sysfs for this namespace (`ip netns exec` does; or "
      "`mount -t sysfs sysfs /sys` in the namespace's own mount namespace; containers need a "
      "/sys of their own, not the host's)",
      missing, seen, missing);
}

}  // namespace

namespace detail {

// engine

engine::engine(const config& cfg, const backend_context& bctx)
    : cfg_(cfg), agent_name_(bctx.agent_name) {
  if (cfg_.num_workers == 0 || cfg_.num_workers > config::max_workers)
    raise(status::invalid_param, "UCX: num_workers={}: use a number from 1 to {}", cfg_.num_workers,
          config::max_workers);
  if (cfg_.num_threads > config::max_workers)
    raise(status::invalid_param, "UCX: num_threads={}: use a number from 0 to {}", cfg_.num_threads,
          config::max_workers);
  // one worker per posting thread
  cfg_.num_workers = std::max(cfg_.num_workers, cfg_.num_threads);
  if (agent_name_.size() > max_name_size)
    raise(status::invalid_param, "UCX: agent name of {} bytes exceeds the limit of {}",
          agent_name_.size(), max_name_size);

  id_ = nixl::detail::host_identity::self();
  netdev_problem_ = netdev_mismatch();
  if (!netdev_problem_.empty()) log::warn("UCX: agent '{}': {}", bctx.agent_name, netdev_problem_);
  {
    std::random_device rd;
    uid_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ reinterpret_cast<std::uintptr_t>(this);
    auto& reg = local_registry::get();
    std::lock_guard lk(reg.mu);
    reg.live[uid_] = alive_;
  }

  const bool want_thread = cfg_.enable_prog_thread.value_or(bctx.progress_thread);
  const bool multi = want_thread || bctx.sync == thread_sync::rw;

  const config_handle ucfg = read_ucp_config(cfg_);

  ucp_params_t up{};
  up.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  up.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | (want_thread ? UCP_FEATURE_WAKEUP : 0);
  up.mt_workers_shared = multi ? 1 : 0;
  const std::string ctx_name = "nixl:" + agent_name_;
  up.name = ctx_name.c_str();
  ucp_context_h raw_ctx = nullptr;
  NIXL_UCX_CHECK(ucp_init(&up, ucfg.get(), &raw_ctx));
  ctx_ = context_handle(raw_ctx);

  ucp_context_attr_t ca{};
  ca.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ctx_.get(), &ca) == UCS_OK)
    cuda_ = (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  watch_ = std::make_unique<worker_watch[]>(cfg_.num_workers);
  for (std::size_t i = 0; i < cfg_.num_workers; ++i) {
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = multi ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SERIALIZED;
    ucp_worker_h w = nullptr;
    NIXL_UCX_CHECK(ucp_worker_create(ctx_.get(), &wp, &w));
    workers_.emplace_back(w);

    ucp_am_handler_param_t ap{};
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    ap.id = notif_am_id;
    ap.cb = &engine::on_notif;
    ap.arg = this;
    NIXL_UCX_CHECK(ucp_worker_set_am_recv_handler(w, &ap));

    ucp_address_t* addr = nullptr;
    std::size_t len = 0;
    NIXL_UCX_CHECK(ucp_worker_get_address(w, &addr, &len));
    addresses_.emplace_back(reinterpret_cast<const char*>(addr), len);
    ucp_worker_release_address(w, addr);
  }

  conn_info_ = wire::encode_conn_info(id_, uid_, addresses_);
  notif_prefix_ = wire::notif_prefix(agent_name_);

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
      detail::throw_ucs(s, "ucp_ep_create", __FILE__, __LINE__, "loopback endpoint");
    }
    self->eps.push_back(h);
  }
  self_ = self.get();
  peers_.push_back(std::move(self));

  if (want_thread) {
    // Owned at once: a throw below (or later in this constructor) closes them.
    epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
    wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_fd_ || !wake_fd_)
      raise(status::backend, "UCX progress thread: epoll_create1/eventfd: {}",
            std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0)
      raise(status::backend, "UCX progress thread: epoll_ctl: {}", std::strerror(errno));
    for (auto& w : workers_) {
      int efd = -1;
      NIXL_UCX_CHECK(ucp_worker_get_efd(w.get(), &efd));
      efds_.push_back(efd);
      ev.data.ptr = this;
      if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, efd, &ev) != 0)
        raise(status::backend, "UCX progress thread: epoll_ctl(worker fd): {}",
              std::strerror(errno));
    }
    const auto delay_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(bctx.progress_delay).count();
    timeout_ms_ =
        bctx.progress_delay.count() > 0 ? static_cast<int>(std::max<long long>(1, delay_ms)) : 100;
    thread_ = std::thread([this] { run(); });
  }
  log::info("UCX: agent '{}' up: {} worker(s), progress thread {}, error mode {}, CUDA {}",
            agent_name_, workers_.size(), want_thread ? "on" : "off",
            to_string(cfg_.error_handling), cuda_ ? "yes" : "no");
}

engine::~engine() {
  alive_->store(false, std::memory_order_release);  // agents of this process see us go
  {
    auto& reg = local_registry::get();
    std::lock_guard lk(reg.mu);
    reg.live.erase(uid_);
  }
  if (thread_.joinable()) {
    stop_.store(true);
    wake();
    thread_.join();
  }
  {
    std::vector<peer_state*> live;
    {
      std::lock_guard lk(peers_mu_);
      for (auto& p : peers_)
        if (!p->closed) live.push_back(p.get());
    }
    for (peer_state* p : live) {
      if (p->pidfd >= 0) {
        ::close(p->pidfd);
        p->pidfd = -1;
      }
      close_eps(p);
    }
  }
  // rkeys come from the workers' pools: release them first. Destroying the workers then
  // completes what a dead peer left pending (callbacks see live slots); registrations last.
  {
    std::lock_guard lk(deferred_mu_);
    deferred_rkeys_.clear();
  }
  workers_.clear();
  drain_deferred(true);
  wake_fd_.reset();
  epoll_fd_.reset();
}

std::uint32_t engine::thread_index() noexcept {
  static std::atomic<std::uint32_t> next{0};
  thread_local const std::uint32_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

void engine::wake() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_.get(), &one, sizeof(one));
}

// The progress thread. Per worker it is in one of two modes:
//  - event mode: it progresses the worker, keeps polling for `progress_spin` after work, then
//    arms it and sleeps on its event fd; a post on the worker wakes it (kick);
//  - driven mode: an application thread progresses the worker (request status polls, agent
//    progress), seen as a changing `user_polls` counter. The thread then neither progresses
//    nor arms that worker: incoming messages do not wake it, it does not compete with that
//    thread for the cores, and it never holds the worker's lock when that thread wants it (on
//    a busy machine a lock holder that loses its core stalls the poller for a time slice). It
//    looks at the counter every tick and takes the worker back to event mode when no
//    application thread has progressed it for two ticks.
// A missed event-fd wake-up (UCX 1.13 can miss one; NIXL polls every 1 ms for that reason) costs
// at most 1 ms during traffic: the sleep after work is 1 ms, doubling while idle up to the
// configured period.
void engine::run() noexcept {
  ::pthread_setname_np(::pthread_self(), "nixl-ucx-prog");
  const std::size_t nw = workers_.size();
  epoll_event evs[16];
  const std::int64_t spin_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(cfg_.progress_spin).count();
  constexpr std::int64_t tick_ns = 250'000;
  constexpr std::int64_t driven_window_ns = 2 * tick_ns;
  std::vector<std::uint32_t> seen(nw, 0);
  std::vector<std::int64_t> last_user(nw, std::numeric_limits<std::int64_t>::min() / 2);
  std::vector<char> driven(nw, 0);
  std::int64_t last_work = 0;
  std::int64_t last_local_check = 0;
  int sleep_ms = 1;
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::int64_t now = now_ns();
    bool any_driven = false;
    bool any_event = false;
    for (std::size_t i = 0; i < nw; ++i) {
      const std::uint32_t u = watch_[i].user_polls.load(std::memory_order_relaxed);
      if (u != seen[i]) {
        seen[i] = u;
        last_user[i] = now;
      }
      const bool d = now - last_user[i] < driven_window_ns;
      if (d != (driven[i] != 0)) {
        driven[i] = d ? 1 : 0;
        set_worker_events(i, !d);
      }
      any_driven |= d;
      any_event |= !d;
    }
    // Bounded passes: operations stuck on a dead peer can keep a worker "busy" forever, and the
    // process watch below must still be read.
    bool busy = false;
    for (std::size_t i = 0; i < nw; ++i) {
      if (driven[i]) continue;
      for (int k = 0; k < 64 && ucp_worker_progress(workers_[i].get()) != 0; ++k) busy = true;
    }
    if (busy) {
      last_work = now_ns();
    } else if (any_event && now - last_work < spin_ns) {
      busy = true;  // keep polling for a while: the next message of a burst is likely near
    }
    if (!busy) busy = !sleep_armed(driven);
    if (busy) sleep_ms = 1;
    int n = 0;
    if (busy) {
      n = ::epoll_wait(epoll_fd_.get(), evs, 16, 0);
    } else if (any_driven) {
      const timespec ts{0, tick_ns};
      n = ::epoll_pwait2(epoll_fd_.get(), evs, 16, &ts, nullptr);
      if (n < 0 && errno == ENOSYS) n = ::epoll_wait(epoll_fd_.get(), evs, 16, 1);
    } else {
      n = ::epoll_wait(epoll_fd_.get(), evs, 16, sleep_ms);
      if (n == 0) sleep_ms = std::min(sleep_ms * 2, timeout_ms_);
    }
    for (std::size_t i = 0; i < nw; ++i) watch_[i].armed_sleep.store(0, std::memory_order_relaxed);
    if (const std::int64_t t = now_ns(); t - last_local_check > 10'000'000) {
      last_local_check = t;
      check_local_peers();
    }
    for (int i = 0; i < n; ++i) {
      void* tag = evs[i].data.ptr;
      if (tag == nullptr) {
        std::uint64_t v;
        [[maybe_unused]] const auto r = ::read(wake_fd_.get(), &v, sizeof(v));
      } else if (tag != this) {
        auto* p = static_cast<peer_state*>(tag);
        {
          std::lock_guard lk(peers_mu_);
          if (p->pidfd >= 0) ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p->pidfd, nullptr);
        }
        mark_failed(p, "process exited");
      }
    }
  }
}

// Before sleeping: announce it on the event-mode workers, make one last pass (a post racing
// with the announcement is either seen by this pass or sees the flag and wakes us), then arm
// them. False when there is work after all.
bool engine::sleep_armed(const std::vector<char>& driven) noexcept {
  const std::size_t nw = workers_.size();
  for (std::size_t i = 0; i < nw; ++i)
    if (!driven[i]) watch_[i].armed_sleep.store(1, std::memory_order_seq_cst);
  for (std::size_t i = 0; i < nw; ++i)
    if (!driven[i] && ucp_worker_progress(workers_[i].get()) != 0) return false;
  for (std::size_t i = 0; i < nw; ++i) {
    if (driven[i]) continue;
    const ucs_status_t s = ucp_worker_arm(workers_[i].get());
    if (s == UCS_ERR_BUSY) return false;
    warn_ucs(s, "ucp_worker_arm", __FILE__, __LINE__);
  }
  return true;
}

// Event fd of worker `i` in the thread's epoll set: watched (event mode) or not (driven mode,
// where the fd may stay readable without the thread wanting to wake for it).
void engine::set_worker_events(std::size_t i, bool on) noexcept {
  epoll_event ev{};
  ev.events = on ? EPOLLIN : 0;
  ev.data.ptr = this;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, efds_[i], &ev) != 0)
    log::warn("UCX progress thread: epoll_ctl(MOD worker fd): {}", std::strerror(errno));
}

void engine::check_local_peers() noexcept {
  std::lock_guard lk(peers_mu_);
  for (auto& p : peers_)
    if (p->local_alive && !p->closed && !p->local_alive->load(std::memory_order_acquire))
      mark_failed(p.get(), "its backend was destroyed");
}

void engine::progress_all() noexcept {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    note_user_poll(i);  // an application thread drives the workers
    for (int k = 0; k < 64 && ucp_worker_progress(workers_[i].get()) != 0; ++k) {
    }
  }
  if (!thread_.joinable()) {
    std::vector<peer_state*> watched;
    {
      std::lock_guard lk(peers_mu_);
      for (auto& p : peers_)
        if ((p->pidfd >= 0 || p->local_alive) && !p->failed.load(std::memory_order_relaxed))
          watched.push_back(p.get());
    }
    for (peer_state* p : watched) probe(p);
  }
}

void engine::probe(peer_state* p) noexcept {
  if (p->local_alive) {
    if (!p->local_alive->load(std::memory_order_acquire))
      mark_failed(p, "its backend was destroyed");
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
  if (!p->failed.exchange(true, std::memory_order_acq_rel))
    log::warn("UCX: peer '{}' is gone ({}); its requests end with NIXL_ERR_REMOTE_DISCONNECT",
              p->name, why);
}

void engine::on_ep_error(void* arg, ucp_ep_h, ucs_status_t st) noexcept {
  auto* p = static_cast<peer_state*>(arg);
  p->owner->mark_failed(p, ucs_status_string(st));
}

ucs_status_t engine::on_notif(void* arg, const void*, std::size_t, void* data, std::size_t len,
                              const ucp_am_recv_param_t* param) noexcept {
  auto* self = static_cast<engine*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    log::warn("UCX: dropped a notification sent by rendezvous (not from a NIXL UCX agent)");
    return UCS_OK;
  }
  const auto got = wire::parse_notif(std::string_view(static_cast<const char*>(data), len),
                                     max_name_size, max_notif_size);
  if (!got) {
    log::warn("UCX: dropped a malformed notification of {} bytes", len);
    return UCS_OK;
  }
  try {
    std::string name(got->sender);
    std::string msg(got->message);
    std::lock_guard lk(self->notif_mu_);
    self->inbox_.emplace_back(std::move(name), std::move(msg));
  } catch (...) {
    log::error("UCX: out of memory storing a notification; dropped");
  }
  return UCS_OK;
}

void engine::take_notifications(notif_map& out) {
  if (!thread_.joinable()) progress_all();
  std::vector<std::pair<std::string, std::string>> got;
  {
    std::lock_guard lk(notif_mu_);
    got.swap(inbox_);
  }
  for (auto& [name, msg] : got) out[name].push_back(std::move(msg));
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
  p->owner = this;
  switch (cfg_.error_handling) {
    case error_mode::peer:
      p->ucx_peer_mode = true;
      break;
    case error_mode::none:
      p->ucx_peer_mode = false;
      break;
    case error_mode::automatic:
      p->ucx_peer_mode = !same_host;
      break;
  }
  // Another agent of this process: watch its backend.
  if (same_process && cfg_.error_handling != error_mode::none) {
    auto& reg = local_registry::get();
    std::lock_guard lk(reg.mu);
    auto it = reg.live.find(rec.uid);
    std::shared_ptr<std::atomic<bool>> alive = it == reg.live.end() ? nullptr : it->second.lock();
    if (alive)
      p->local_alive = std::move(alive);
    else
      p->failed.store(true);  // that backend is gone already
  }
  // Same host, other process, no UCX peer mode: watch the process itself.
  if (cfg_.error_handling == error_mode::automatic && same_host && !same_process) {
    const long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(rec.id.pid), 0u);
    if (fd >= 0) {
      p->pidfd = static_cast<int>(fd);
      ::fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
      // a recycled pid belongs to another process: the peer is already gone
      if (nixl::detail::process_start_time(rec.id.pid) != rec.id.start_time) p->failed.store(true);
    } else if (errno == ESRCH) {
      p->failed.store(true);
    } else {
      log::warn("UCX: pidfd_open({}) failed ({}); using UCX error mode peer for '{}'", rec.id.pid,
                std::strerror(errno), name);
      p->ucx_peer_mode = true;
    }
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
      raise(status::backend, "UCX load_peer('{}'): ucp_ep_create: {}", name, ucs_status_string(s));
    }
    p->eps.push_back(h);
  }

  peer_state* raw = p.get();
  std::lock_guard lk(peers_mu_);
  if (raw->pidfd >= 0 && thread_.joinable()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = raw;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, raw->pidfd, &ev) != 0)
      log::warn("UCX: cannot watch process {} of '{}': {}", rec.id.pid, name, std::strerror(errno));
  }
  peers_.push_back(std::move(p));
  log::debug("UCX: loaded peer '{}' (pid {}, {}, UCX error mode {})", name, rec.id.pid,
             same_host ? "same host" : "other host", raw->ucx_peer_mode ? "peer" : "none");
  return raw;
}

void engine::close_eps(peer_state* p) noexcept {
  if (p->pidfd >= 0 || p->local_alive) probe(p);
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
    wait_all(pending, now_ns() + flush_limit_ns, true);
  }
  const bool dead = p->failed.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < p->eps.size(); ++i) {
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // UCX refuses a forced close in error mode none; such an endpoint is left to be purged when
    // the worker is destroyed.
    cp.flags = dead && p->ucx_peer_mode ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(p->eps[i], &cp);
    if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
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

op_slot* engine::acquire_slot() {
  std::lock_guard lk(slots_mu_);
  if (!free_slots_.empty()) {
    op_slot* s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  auto s = std::make_unique<op_slot>();
  s->owner = this;
  s->notif.reserve(notif_prefix_.size() + 256);
  free_slots_.reserve(slots_.size() + 1);  // release_slot never allocates
  slots_.push_back(std::move(s));
  return slots_.back().get();
}

void engine::release_slot(op_slot* s) noexcept {
  s->state.store(op_slot::idle, std::memory_order_relaxed);
  s->has_notif = false;
  std::lock_guard lk(slots_mu_);
  free_slots_.push_back(s);
}

bool engine::detach(op_slot* s) noexcept {
  int expected = op_slot::busy;
  // counted before the slot can be reclaimed, so that orphans_ never goes below zero
  orphans_.fetch_add(1, std::memory_order_acq_rel);
  if (s->state.compare_exchange_strong(expected, op_slot::orphan, std::memory_order_acq_rel))
    return true;
  orphans_.fetch_sub(1, std::memory_order_acq_rel);
  return false;
}

void engine::reclaim(op_slot* s) noexcept {
  release_slot(s);
  orphans_.fetch_sub(1, std::memory_order_acq_rel);
}

bool engine::handles_in_use() noexcept {
  if (orphans_.load(std::memory_order_acquire) != 0) return true;
  std::lock_guard lk(peers_mu_);
  for (const auto& p : peers_)
    if (!p->is_self && !p->ucx_peer_mode && p->failed.load(std::memory_order_acquire)) return true;
  return false;
}

template <class H>
void engine::defer_handles(std::vector<H>& list, std::span<H> handles) noexcept {
  // UCX 1.13 keeps an emulated put to a dead same-host peer queued on its shared-memory endpoint
  // until ucp_worker_destroy purges it; the purge then releases the operation's memory handle,
  // so a handle unmapped before that is used after free (SIGSEGV in ucp_mem_rereg_mds).
  if (handles_in_use()) {
    std::lock_guard lk(deferred_mu_);
    try {
      for (H& h : handles) list.push_back(std::move(h));
      return;
    } catch (...) {
      // out of memory: release the rest now rather than leak them
    }
  } else {
    drain_deferred(false);
  }
  for (H& h : handles) h = H{};
}

void engine::defer(mem_handle& m) noexcept {
  defer_handles(deferred_memh_, std::span(&m, 1));
}

void engine::defer(std::vector<rkey_handle>& rkeys) noexcept {
  defer_handles(deferred_rkeys_, std::span(rkeys));
  rkeys.clear();
}

void engine::drain_deferred(bool force) noexcept {
  if (!force && handles_in_use()) return;
  std::vector<mem_handle> memh;
  std::vector<rkey_handle> rkeys;
  {
    std::lock_guard lk(deferred_mu_);
    memh.swap(deferred_memh_);
    rkeys.swap(deferred_rkeys_);
  }
}

namespace {
void on_notify_done(void* request, ucs_status_t st, void* user) noexcept {
  ucp_request_free(request);
  warn_ucs(st, "ucp_am_send_nbx", __FILE__, __LINE__);
  delete static_cast<std::string*>(user);
}
}  // namespace

void engine::notify(peer_state* p, std::string_view msg) {
  if (p == nullptr || p->closed) raise(status::not_found, "UCX notify: the peer is not loaded");
  if (p->failed.load())
    raise(status::remote_disconnect, "UCX notify('{}'): the peer is gone", p->name);
  if (msg.size() > max_notif_size)
    raise(status::invalid_param, "UCX notify('{}'): message of {} bytes exceeds the limit of {}",
          p->name, msg.size(), max_notif_size);
  auto buf = std::make_unique<std::string>(notif_prefix_);
  buf->append(msg);
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;
  rp.cb.send = &on_notify_done;
  rp.user_data = buf.get();
  ucs_status_ptr_t r =
      ucp_am_send_nbx(p->eps[0], notif_am_id, nullptr, 0, buf->data(), buf->size(), &rp);
  if (UCS_PTR_IS_ERR(r))
    raise(to_status(UCS_PTR_STATUS(r)), "UCX notify('{}'): ucp_am_send_nbx: {}", p->name,
          ucs_status_string(UCS_PTR_STATUS(r)));
  if (r != nullptr) {
    buf.release();  // freed by on_notify_done
    kick(0);
  }
}

std::pair<void*, ucp_mem_h> engine::allocate(std::size_t bytes) {
  if (bytes == 0) raise(status::invalid_param, "UCX allocate: zero bytes; ask for at least one");
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                  UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = nullptr;
  mp.length = bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  if (const ucs_status_t s = ucp_mem_map(ctx_.get(), &mp, &memh); s != UCS_OK)
    raise(status::backend, "UCX allocate: ucp_mem_map(ALLOCATE, {} bytes): {}", bytes,
          ucs_status_string(s));
  ucp_mem_attr_t ma{};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  if (const ucs_status_t s = ucp_mem_query(memh, &ma); s != UCS_OK) {
    NIXL_UCX_WARN(ucp_mem_unmap(ctx_.get(), memh));
    raise(status::backend, "UCX allocate: ucp_mem_query: {}", ucs_status_string(s));
  }
  std::lock_guard lk(alloc_mu_);
  allocs_[reinterpret_cast<std::uintptr_t>(ma.address)] = {bytes, memh};
  return {ma.address, memh};
}

void engine::free_allocation(void* addr) noexcept {
  ucp_mem_h memh = nullptr;
  {
    std::lock_guard lk(alloc_mu_);
    auto it = allocs_.find(reinterpret_cast<std::uintptr_t>(addr));
    if (it == allocs_.end()) return;
    memh = it->second.second;
    allocs_.erase(it);
  }
  NIXL_UCX_WARN(ucp_mem_unmap(ctx_.get(), memh));
}

ucp_mem_h engine::allocation_of(std::uintptr_t addr, std::size_t len) noexcept {
  std::lock_guard lk(alloc_mu_);
  auto it = allocs_.upper_bound(addr);
  if (it == allocs_.begin()) return nullptr;
  --it;
  const std::uintptr_t base = it->first;
  const std::size_t size = it->second.first;
  return addr >= base && len <= size && addr - base <= size - len ? it->second.second : nullptr;
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

// backend: setup path

backend::backend(const config& cfg, const backend_context& ctx)
    : eng_(std::make_unique<detail::engine>(cfg, ctx)) {}

backend::region backend::register_region(mem_kind kind, const reg_desc& d) {
  if (kind != mem_kind::dram && kind != mem_kind::vram)
    raise(status::not_supported,
          "UCX register_region: {} memory is not supported; UCX moves dram and vram",
          to_string(kind));
  if (kind == mem_kind::vram && !eng_->cuda_supported())
    raise(status::not_supported,
          "UCX register_region: cannot register vram at {:#x} (device {}): this UCX library ({}) "
          "reports no CUDA memory support; use a UCX built --with-cuda or nixl::cuda::backend",
          d.addr, d.dev, ucp_get_version_string());
  if (d.len == 0 || d.addr == 0)
    raise(status::invalid_param,
          "UCX register_region: empty region (addr {:#x}, len {}); register a non-null range",
          d.addr, d.len);
  region r;
  // Memory from allocate() is registered already (and mapped through shared memory).
  ucp_mem_h memh = kind == mem_kind::dram ? eng_->allocation_of(d.addr, d.len) : nullptr;
  if (memh != nullptr) {
    r.memh = detail::mem_handle::borrowed(memh);
  } else {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = reinterpret_cast<void*>(d.addr);
    mp.length = d.len;
    if (kind == mem_kind::vram) {
      mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
      mp.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    if (const ucs_status_t s = ucp_mem_map(eng_->context(), &mp, &memh); s != UCS_OK)
      raise(status::backend, "UCX register_region: ucp_mem_map({:#x}, {} bytes): {}", d.addr, d.len,
            ucs_status_string(s));
    r.memh = detail::mem_handle(eng_->context(), memh);
  }
  r.range = d;
  r.kind = kind;
  void* packed = nullptr;
  std::size_t packed_len = 0;
  if (const ucs_status_t s = ucp_rkey_pack(eng_->context(), memh, &packed, &packed_len);
      s != UCS_OK)
    raise(status::backend, "UCX register_region: ucp_rkey_pack: {}", ucs_status_string(s));
  try {
    r.public_data = detail::wire::encode_rkey(
        kind, std::string_view(static_cast<const char*>(packed), packed_len));
  } catch (...) {
    ucp_rkey_buffer_release(packed);
    throw;
  }
  ucp_rkey_buffer_release(packed);
  return r;
}

void backend::deregister_region(region& r) noexcept {
  eng_->defer(r.memh);
}

void backend::prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer& p) {
  prepare(r, op, local, remote, p, {});
}

namespace {
// `worker_id=N` in NIXL's customParam: items separated by commas, spaces or semicolons; other
// items are left to other backends.
std::optional<std::uint32_t> custom_worker(std::string_view custom, std::size_t workers) {
  std::optional<std::uint32_t> w;
  while (!custom.empty()) {
    const auto cut = custom.find_first_of(", ;");
    const std::string_view item = custom.substr(0, cut);
    custom = cut == std::string_view::npos ? std::string_view{} : custom.substr(cut + 1);
    constexpr std::string_view key = "worker_id=";
    if (item.substr(0, key.size()) != key) continue;
    const std::string_view v = item.substr(key.size());
    std::uint32_t n = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || ptr != v.data() + v.size() || n >= workers)
      raise(status::invalid_param,
            "UCX prepare: custom parameter '{}': this backend has {} worker(s); use worker_id=0 "
            "to {} (or set num_workers / num_threads)",
            item, workers, workers - 1);
    w = n;
  }
  return w;
}
}  // namespace

void backend::prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer& p,
                      std::string_view custom) {
  if (p.state == nullptr || p.state->closed)
    raise(status::not_found, "UCX prepare: the peer is not loaded");
  if (local.size() != remote.size())
    raise(status::invalid_param, "UCX prepare: {} local descriptors but {} remote ones",
          local.size(), remote.size());
  if (r.slot_ != nullptr && r.slot_->state.load() == detail::op_slot::busy)
    raise(status::repost_active, "UCX prepare: the request is still in flight");
  const auto nw = static_cast<std::uint32_t>(eng_->num_workers());
  const std::uint32_t w = custom_worker(custom, nw).value_or(eng_->next_worker());
  // split_batch_size: chunks of that many descriptors, on workers w, w+1, ...
  const std::size_t split = eng_->cfg().split_batch_size;
  const bool chunked = split > 0 && nw > 1 && local.size() > split;
  std::vector<detail::xfer_item> items;
  std::vector<chunk> chunks;
  items.reserve(local.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    const bound_desc<region>& l = local[i];
    const bound_desc<remote_region>& rm = remote[i];
    if (l.region == nullptr || rm.region == nullptr)
      raise(status::invalid_param, "UCX prepare: descriptor {} is not bound to a region", i);
    if (l.len != rm.len)
      raise(status::invalid_param,
            "UCX prepare: descriptor {}: local length {} != remote length {}", i, l.len, rm.len);
    if (!l.region->range.covers(l))
      raise(status::invalid_param,
            "UCX prepare: local descriptor {} [{:#x}, +{}) lies outside its registered region "
            "[{:#x}, +{})",
            i, l.addr, l.len, l.region->range.addr, l.region->range.len);
    if (rm.region->peer != p.state)
      raise(status::invalid_param,
            "UCX prepare: remote descriptor {} belongs to agent '{}', not to '{}'", i,
            rm.region->peer ? rm.region->peer->name : std::string("?"), p.state->name);
    if (!rm.region->range.covers(rm))
      raise(status::invalid_param,
            "UCX prepare: remote descriptor {} [{:#x}, +{}) lies outside the region [{:#x}, +{}) "
            "that '{}' registered",
            i, rm.addr, rm.len, rm.region->range.addr, rm.region->range.len, p.state->name);
    if (l.len == 0) continue;
    std::uint32_t cw = w;
    if (chunked) {
      const std::size_t k = items.size() / split;  // chunk of this item
      cw = static_cast<std::uint32_t>((w + k) % nw);
      if (chunks.size() == k) {
        const auto at = static_cast<std::uint32_t>(items.size());
        chunks.push_back({at, at, p.state->eps[cw], cw});
      }
      ++chunks.back().end;
    }
    items.push_back({reinterpret_cast<void*>(l.addr), l.len, rm.addr, rm.region->rkeys[cw].get(),
                     l.region->memh.get()});
  }
  if (chunks.size() == 1) chunks.clear();
  if (r.slot_ == nullptr) r.slot_ = eng_->acquire_slot();
  r.items_ = std::move(items);
  r.chunks_ = std::move(chunks);
  r.peer_ = p.state;
  r.ep_ = p.state->eps[w];
  r.worker_ = w;
  r.op_ = op;
}

status backend::release(request& r) noexcept {
  detail::op_slot* s = r.slot_;
  if (s == nullptr) return status::success;
  if (s->state.load(std::memory_order_acquire) == detail::op_slot::busy) {
    // UCX cannot cancel one-sided operations (ucp_request_cancel ignores them). Most end within
    // microseconds: progress for a short grace, then abandon the rest to the engine, which
    // keeps the slot, its notification bytes and the registrations UCX may still use.
    const auto deadline = std::chrono::steady_clock::now() + detail::engine::release_grace;
    while (s->state.load(std::memory_order_acquire) == detail::op_slot::busy &&
           !r.peer_->failed.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      eng_->poll(r.worker_, r.peer_);
      for (const chunk& c : r.chunks_)
        if (c.worker != r.worker_) eng_->poll(c.worker, nullptr);
    }
  }
  if (!eng_->detach(s)) eng_->release_slot(s);
  r.slot_ = nullptr;
  r.items_.clear();
  r.chunks_.clear();
  return status::success;
}

std::optional<std::chrono::microseconds> backend::estimate(const request& r) const {
  if (r.ep_ == nullptr) return std::nullopt;
  double seconds = 0;
  for (const detail::xfer_item& it : r.items_) {
    ucp_ep_evaluate_perf_param_t pp{};
    pp.field_mask = UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE;
    pp.message_size = it.len;
    ucp_ep_evaluate_perf_attr_t pa{};
    pa.field_mask = UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME;
    if (ucp_ep_evaluate_perf(r.ep_, &pp, &pa) != UCS_OK) return std::nullopt;
    seconds += pa.estimated_time;
  }
  return std::chrono::microseconds(static_cast<std::int64_t>(seconds * 1e6 + 0.999));
}

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
  eng_->defer(r.rkeys);
}

std::string backend::connection_info() const {
  return eng_->connection_info();
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

std::string backend::public_data(const region& r) const {
  return r.public_data;
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

void backend::progress() noexcept {
  eng_->progress_all();
}

std::string backend::endpoint_info(const peer& p) const {
  return eng_->endpoint_info(p.state);
}

memory backend::allocate(std::size_t bytes) {
  auto [addr, memh] = eng_->allocate(bytes);
  return memory(eng_.get(), addr, bytes);
}

memory::~memory() {
  if (eng_ != nullptr && addr_ != nullptr) eng_->free_allocation(addr_);
}

}  // namespace nixl::ucx
