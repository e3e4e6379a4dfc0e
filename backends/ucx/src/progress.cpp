// The UCX backend's progress: the progress thread (event and driven modes per worker, the
// process watch of same-host peers) and the passes an application thread makes without it.

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx {
namespace detail {

void engine::start_progress_thread(std::chrono::microseconds delay) {
  // Owned at once: a throw below (or later in this constructor) closes them.
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.open();
  if (!epoll_fd_ || !wake_fd_)
    raise(status::backend, "UCX progress thread: epoll_create1/eventfd: {}", std::strerror(errno));
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
      raise(status::backend, "UCX progress thread: epoll_ctl(worker fd): {}", std::strerror(errno));
  }
  // the longest sleep while idle: the agent's progress_delay, else 100 ms
  const auto delay_ms = std::chrono::duration_cast<std::chrono::milliseconds>(delay).count();
  timeout_ms_ = delay.count() > 0 ? static_cast<int>(std::max<long long>(1, delay_ms)) : 100;
  // the same beat goes to every peer of another host (send_beat)
  beat_ = wire::encode_beat(notif_prefix_, static_cast<std::uint32_t>(beat_every_ns() / 1'000'000));
  thread_ = std::thread([this] { run(); });
}

void engine::wake() noexcept {
  wake_fd_.signal();
}

// The progress thread. Per worker it is in one of two modes:
//  - event mode: it progresses the worker, keeps polling for `progress_spin` after work, then
//    arms it and sleeps on its event fd; a post on the worker wakes it (kick);
//  - driven mode: an application thread progresses the worker (request status polls, agent
//    progress), seen through the worker's poll_watch (nixl/detail/poll_watch.hpp). The thread
//    then neither progresses nor arms that worker: incoming messages do not wake it, it does
//    not compete with that thread for the cores, and it never holds the worker's lock when that
//    thread wants it (on a busy machine a lock holder that loses its core stalls the poller for
//    a time slice). It looks at the watch every tick and takes the worker back to event mode
//    when no application thread has progressed it for two ticks (the watch's window), or at
//    once when the thread that drove it says it stopped (request::wait, after its spin, before
//    it sleeps: hand_back).
// A missed event-fd wake-up (UCX 1.13 can miss one; NIXL polls every 1 ms for that reason) costs
// at most 1 ms during traffic: the sleep after work is 1 ms, doubling while idle up to the
// configured period.
void engine::run() noexcept {
  ::pthread_setname_np(::pthread_self(), "nixl-ucx-prog");
  // Its timed sleeps are 20 us while driver copies run (below): the default slack of 50 us
  // would stretch each to 70.
  ::prctl(PR_SET_TIMERSLACK, 1000UL);
  const std::size_t nw = workers_.size();
  epoll_event evs[16];
  const std::int64_t spin_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(cfg_.progress_spin).count();
  constexpr std::int64_t tick_ns = nixl::detail::poll_watch::tick_ns;  // a wake-up per tick
  std::vector<nixl::detail::poll_window> driven(nw);  // per worker: driven mode (docs/ucx.md)
  std::vector<char> off(nw, 0);  // driven, or a bulk post in progress: not progressed, not armed
  std::int64_t last_work = 0;
  std::int64_t last_local_check = 0;
  int sleep_ms = 1;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (posts_runnable()) run_queued_posts(false);
    const std::int64_t now = now_ns();
    bool any_driven = false;
    bool any_event = false;
    for (std::size_t i = 0; i < nw; ++i) {
      // A handed-over post that an application thread's check is making counts as a poll; a
      // thread that hands the worker back (it waits now) puts it in event mode at once.
      const bool d = driven[i].update(watch_[i].polls, now,
                                      watch_[i].app_posts.load(std::memory_order_relaxed) != 0);
      if (driven[i].changed()) set_worker_events(i, !d);
      off[i] = d || watch_[i].bulk_posts.load(std::memory_order_acquire) != 0 ? 1 : 0;
      any_driven |= off[i] != 0;
      any_event |= off[i] == 0;
    }
    // Bounded passes: operations stuck on a dead peer can keep a worker "busy" forever, and the
    // process watch below must still be read.
    bool busy = false;
    for (std::size_t i = 0; i < nw; ++i) {
      if (off[i]) continue;
      for (int k = 0; k < 64 && ucp_worker_progress(workers_[i].get()) != 0; ++k) busy = true;
    }
    // Copies run for a peer (copy requests): polled for from shortly before their expected
    // end, and the spin starts when they end rather than when the request came. The peer sees
    // their end through the events at the same time and its next request is likely near; a
    // wake-up from sleep costs more than the spin (add_served). Only on workers this thread
    // progresses: a driven worker's poller takes that request.
    if (served_pending()) {
      const bool ended = reap_served(false) != 0;
      const std::int64_t t = now_ns();
      if (any_event && (ended || (t >= served_watch_from() && t < served_watch_until())))
        busy = true;
    }
    if (busy) {
      last_work = now_ns();
    } else if (any_event && now - last_work < spin_ns) {
      busy = true;  // keep polling for a while: the next message of a burst is likely near
    }
    // A post handed over while this pass changed a worker's mode may have seen it driven and
    // not woken the thread: look at the queue once more (seq_cst, as queue_post) before sleeping.
    if (!busy && posts_runnable()) busy = true;
    if (!busy) busy = !sleep_armed(off);
    if (busy) sleep_ms = 1;
    int n = 0;
    if (busy) {
      n = ::epoll_wait(epoll_fd_.get(), evs, 16, 0);
    } else if (any_driven || gpu_pending() || served_pending()) {
      // driver copies pending, ours or a peer's: their events are looked at every 20 us (no
      // wake-up comes), a peer's until polling for them starts
      long ns = gpu_pending() || served_pending() ? 20'000 : tick_ns;
      if (served_pending()) {
        const std::int64_t left = served_watch_from() - now_ns();
        if (left > 0) ns = std::clamp<std::int64_t>(left, 1'000, ns);
      }
      const timespec ts{0, ns};
      n = ::epoll_pwait2(epoll_fd_.get(), evs, 16, &ts, nullptr);
      if (n < 0 && errno == ENOSYS) n = ::epoll_wait(epoll_fd_.get(), evs, 16, 1);
    } else {
      n = ::epoll_wait(epoll_fd_.get(), evs, 16, sleep_ms);
      if (n == 0) sleep_ms = std::min(sleep_ms * 2, timeout_ms_);
    }
    for (std::size_t i = 0; i < nw; ++i) watch_[i].armed_sleep.store(0, std::memory_order_relaxed);
    if (gpu_pending()) reap_gpu();  // driver copies whose events say they ended
    if (const std::int64_t t = now_ns(); t - last_local_check > 10'000'000) {
      last_local_check = t;
      check_local_peers();
      send_beats(t);
      judge_beats(t);
    }
    adopt_senders();
    for (int i = 0; i < n; ++i) {
      void* tag = evs[i].data.ptr;
      if (tag == nullptr) {
        wake_fd_.drain();
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

// Before sleeping: announce it on the workers not `off` (driven, or a bulk post in progress), make
// one last pass (a post racing with the announcement is either seen by this pass or sees the flag
// and wakes us), then arm them. False when there is work after all.
bool engine::sleep_armed(const std::vector<char>& off) noexcept {
  const std::size_t nw = workers_.size();
  for (std::size_t i = 0; i < nw; ++i)
    if (!off[i]) watch_[i].armed_sleep.store(1, std::memory_order_seq_cst);
  for (std::size_t i = 0; i < nw; ++i)
    if (!off[i] && ucp_worker_progress(workers_[i].get()) != 0) return false;
  for (std::size_t i = 0; i < nw; ++i) {
    if (off[i]) continue;
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

void engine::progress_all() noexcept {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    note_user_poll(i);  // an application thread drives the workers
    for (int k = 0; k < 64 && ucp_worker_progress(workers_[i].get()) != 0; ++k) {
    }
  }
  if (!thread_.joinable()) {
    adopt_senders();
    judge_beats(now_ns());
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

}  // namespace detail

void backend::progress() noexcept {
  eng_->progress_all();
}

}  // namespace nixl::ucx
