// The progress loop: completion queues of every rail, posts waiting for room, heartbeats, and
// the thread that runs them, sleeping on the queues' wait descriptors when idle.

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include <rdma/fi_cm.h>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::libfabric::detail {

std::size_t engine::drain(std::size_t ri) noexcept {
  rail& r = *rails_[ri];
  fi_cq_msg_entry ev[16];
  std::unique_lock lk(r.mu, std::try_to_lock);
  if (!lk.owns_lock()) return 0;  // another thread reads this queue now
  const ssize_t n = fi_cq_read(r.cq, ev, 16);
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    const ssize_t e = fi_cq_readerr(r.cq, &err, 0);
    lk.unlock();
    if (e >= 0) on_error(err);
    return 1;
  }
  lk.unlock();
  if (n <= 0) return 0;
  for (ssize_t i = 0; i < n; ++i) on_completion(ev[i]);
  return static_cast<std::size_t>(n);
}

void engine::on_completion(const fi_cq_msg_entry& e) noexcept {
  auto* c = static_cast<op_ctx*>(e.op_context);
  if (c == nullptr) return;
  switch (c->kind) {
    case ctx_kind::rma: {
      op_slot* s = c->slot;
      // delivered (FI_DELIVERY_COMPLETE): the peer took it, so it lives
      if (rma_flags_ != 0 && s->peer != nullptr)
        s->peer->last_seen_ns.store(now_ns(), std::memory_order_relaxed);
      if (s->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) data_done(s);
      break;
    }
    case ctx_kind::notif: {
      give_send_buffer(c->index);
      if (rma_flags_ != 0 && c->slot->peer != nullptr)
        c->slot->peer->last_seen_ns.store(now_ns(), std::memory_order_relaxed);
      complete(c->slot, c->slot->abort ? c->slot->end : status::success);
      break;
    }
    case ctx_kind::ctrl:
      give_send_buffer(c->index);
      break;
    case ctx_kind::recv:
      on_message(reinterpret_cast<const char*>(bufs_.get() + msg_cap_ * c->index), e.len);
      post_recv(c->index);
      break;
  }
}

void engine::on_error(const fi_cq_err_entry& e) noexcept {
  auto* c = static_cast<op_ctx*>(e.op_context);
  if (c == nullptr) {
    log::warn("LIBFABRIC: completion error without context: {}", fi_strerror(e.err));
    return;
  }
  // A provider cancels what it still held when the connection to the peer broke (tcp;ofi_rxm):
  // outside teardown that is the peer's failure, not a cancellation by this agent.
  status st = to_status(e.err);
  if (st == status::canceled && !stop_.load(std::memory_order_relaxed) &&
      (c->kind == ctx_kind::rma || c->kind == ctx_kind::notif))
    st = status::remote_disconnect;
  switch (c->kind) {
    case ctx_kind::rma: {
      op_slot* s = c->slot;
      s->fail(st);
      if (st == status::remote_disconnect && s->peer != nullptr)
        mark_failed(s->peer, fi_strerror(e.err));
      if (s->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) data_done(s);
      break;
    }
    case ctx_kind::notif:
      give_send_buffer(c->index);
      if (st == status::remote_disconnect && c->slot->peer != nullptr)
        mark_failed(c->slot->peer, fi_strerror(e.err));
      complete(c->slot, c->slot->abort ? c->slot->end : st);
      break;
    case ctx_kind::ctrl:
      give_send_buffer(c->index);
      // tcp;ofi_rxm also cancels a control message (a ping, a hello) queued on a connection it
      // replaces, with the peer alive (seen when both sides connect at once on a busy
      // machine). A control message carries no data: whether the peer lives is what its
      // heartbeat answers say (peer_timeout_ms), so only another error marks it failed here.
      if (c->peer != nullptr && !stop_.load(std::memory_order_relaxed) && e.err != FI_ECANCELED)
        mark_failed(c->peer, fi_strerror(e.err));
      break;
    case ctx_kind::recv:
      if (stop_.load(std::memory_order_relaxed) || e.err == FI_ECANCELED) return;
      log::warn("LIBFABRIC: receive failed ({}); a message longer than {} bytes was dropped",
                fi_strerror(e.err), msg_cap_);
      post_recv(c->index);
      break;
  }
}

void engine::on_message(const char* data, std::size_t len) noexcept {
  const auto m =
      wire::parse_message(std::string_view(data, len), max_name_size, cfg_.max_notif_size);
  if (!m) {
    log::warn("LIBFABRIC: dropped a malformed message of {} bytes", len);
    return;
  }
  if (awaiting_contact_.load(std::memory_order_acquire) > 0) {
    // heard from it: its connection exists, this side may send now
    std::lock_guard lk(peers_mu_);
    for (auto& p : peers_)
      if (p->uid == m->uid && !p->contact.exchange(true, std::memory_order_acq_rel))
        awaiting_contact_.fetch_sub(1, std::memory_order_acq_rel);
  }
  switch (m->type) {
    case wire::msg_type::notif:
    case wire::msg_type::abort: {
      const bool abort = m->type == wire::msg_type::abort;
      using kind = nixl::detail::notif_inbox::kind;
      if (!inbox_.push(abort ? kind::abort : kind::notification, m->sender, m->text))
        log::warn("LIBFABRIC: out of memory; {} from '{}' was dropped",
                  abort ? "an abort notice" : "a notification", m->sender);
      if (waker_ != nullptr) waker_->notify();
      break;
    }
    case wire::msg_type::ping: {
      // answer on rail 0 to the address the ping names (checked like connection info)
      const rail& r0 = *rails_[0];
      if (m->address.size() != r0.address.size() &&
          !(r0.info->addr_format == FI_ADDR_STR && !m->address.empty() &&
            m->address.back() == '\0'))
        return;
      fi_addr_t addr = FI_ADDR_UNSPEC;
      std::shared_ptr<local_life> life;
      try {
        std::lock_guard lk(peers_mu_);
        auto it = reply_addr_.find(m->address);
        if (it == reply_addr_.end()) {
          if (reply_addr_.size() >= max_senders) return;
          // a sender of this process is answered only while it lives (see local_life)
          reply_to to;
          bool gone = false;
          to.life = find_local(m->uid, gone);
          if (gone) return;
          local_hold hold(to.life.get());
          if (!hold.ok()) return;
          std::lock_guard rl(rails_[0]->mu);
          if (fi_av_insert(rails_[0]->av, m->address.data(), 1, &to.addr, 0, nullptr) != 1) return;
          it = reply_addr_.emplace(std::string(m->address), std::move(to)).first;
        }
        watch_sender(it->second, m->sender, m->uid, m->period_ms, now_ns());
        addr = it->second.addr;
        life = it->second.life;
      } catch (...) {
        return;
      }
      try {
        send_ctrl(addr, nullptr, life.get(), wire::encode_pong(uid_, m->token, m->seq));
      } catch (...) {
      }
      break;
    }
    case wire::msg_type::bye: {
      std::lock_guard lk(peers_mu_);
      for (auto& [where, to] : reply_addr_)
        if (to.uid == m->uid && to.watch.watched()) {
          log::debug("LIBFABRIC: '{}' unloaded this agent; no longer watched", to.name);
          to.watch.stop();
        }
      break;
    }
    case wire::msg_type::pong: {
      std::lock_guard lk(peers_mu_);
      if (m->token >= peers_.size()) return;
      peer_state* p = peers_[m->token].get();
      if (p->uid == m->uid && m->seq != 0 && m->seq <= p->ping_seq)
        p->last_seen_ns.store(now_ns(), std::memory_order_relaxed);
      break;
    }
  }
}

bool engine::send_ctrl(fi_addr_t dest, peer_state* p, local_life* to, std::string_view bytes,
                       bool may_drain) noexcept {
  if (bytes.size() > msg_cap_) return false;
  if (to != nullptr && !local_hold(to).ok()) {
    if (p != nullptr) mark_failed(p, "its backend in this process was destroyed");
    return false;
  }
  const int i = take_send_buffer();
  if (i < 0) return false;
  std::byte* buf = bufs_.get() + msg_cap_ * (cfg_.rx_buffers + static_cast<std::size_t>(i));
  std::memcpy(buf, bytes.data(), bytes.size());
  op_ctx& c = send_ctx_[i];
  c.kind = ctx_kind::ctrl;
  c.peer = p;
  rail& r0 = *rails_[0];
  for (int attempt = 0; attempt < 16; ++attempt) {
    ssize_t rc;
    {
      local_hold hold(to);
      if (!hold.ok()) {
        give_send_buffer(static_cast<std::uint32_t>(i));
        if (p != nullptr) mark_failed(p, "its backend in this process was destroyed");
        return false;
      }
      std::lock_guard lk(r0.mu);
      rc = fi_send(r0.ep, buf, bytes.size(), bufs_desc_, dest, &c);
    }
    if (rc == 0) return true;
    if (rc != -FI_EAGAIN) {
      give_send_buffer(static_cast<std::uint32_t>(i));
      if (p != nullptr) mark_failed(p, fi_strerror(static_cast<int>(-rc)));
      return false;
    }
    if (!may_drain) break;
    drain(0);
  }
  give_send_buffer(static_cast<std::uint32_t>(i));
  return false;
}

void engine::heartbeat() noexcept {
  std::unique_lock lk(peers_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return;
  const std::int64_t now = now_ns();
  if (now < next_heartbeat_ns_) return;
  const std::int64_t period = std::chrono::nanoseconds(cfg_.heartbeat).count();
  const std::int64_t timeout = std::chrono::nanoseconds(cfg_.peer_timeout).count();
  // This side judges every quarter period. A longer gap means this thread (or the whole
  // process) did not run: answers may wait unread in the queues, and the time without any says
  // nothing of the peer. That gap does not count against any peer.
  const std::int64_t gap = next_heartbeat_ns_ == 0 ? 0 : now - next_heartbeat_ns_;
  next_heartbeat_ns_ = now + period / 4;
  if (gap > period) {
    for (auto& up : peers_) {
      std::int64_t seen = up->last_seen_ns.load(std::memory_order_relaxed);
      while (!up->last_seen_ns.compare_exchange_weak(seen, std::min(seen + gap, now),
                                                     std::memory_order_relaxed)) {
      }
    }
  }
  if (gap > period)
    for (auto& [where, to] : reply_addr_) to.watch.discount(gap, now);
  check_senders(now);
  // Pings say who sends them and, from a progress thread, how often: the peer watches this
  // agent by them (docs/libfabric.md, "Agents found gone").
  const bool regular = thread_.joinable() && agent_name_.size() <= max_name_size;
  const auto period_ms = regular ? static_cast<std::uint32_t>(cfg_.heartbeat.count()) : 0;
  const std::string_view me = regular ? std::string_view(agent_name_) : std::string_view();
  for (auto& up : peers_) {
    peer_state* p = up.get();
    if (p->is_self || p->closed || p->failed.load(std::memory_order_relaxed)) continue;
    // A live peer answers every ping; one unheard of for peer_timeout is gone, also when
    // no ping could even be sent (a provider that keeps answering EAGAIN to a dead address).
    if (now - p->last_seen_ns.load(std::memory_order_relaxed) > timeout) {
      mark_failed(p, "no heartbeat answer within peer_timeout_ms");
      continue;
    }
    if (now - p->ping_sent_ns < period || !may_send(p)) continue;
    std::string ping;
    try {
      ping = wire::encode_ping(uid_, p->token, p->ping_seq + 1, rails_[0]->address, period_ms, me);
    } catch (...) {
      continue;
    }
    if (send_ctrl(p->addr[0], p, p->local.get(), ping, false)) {
      p->ping_seq += 1;
      p->ping_out = true;
      p->ping_sent_ns = now;
    }
  }
}

void engine::watch_sender(reply_to& to, std::string_view name, std::uint64_t uid,
                          std::uint32_t period_ms, std::int64_t now) noexcept {
  if (name.empty() || period_ms == 0) {  // pings not regular: their silence says nothing
    to.watch.stop();
    return;
  }
  try {
    if (to.name != name) to.name = std::string(name);
  } catch (...) {
    to.watch.stop();
    return;
  }
  const bool was_watched = to.watch.watched() && !to.watch.gone && to.uid == uid;
  to.uid = uid;
  // this side's peer_timeout, and at least four of the sender's periods
  const bool was_gone =
      to.watch.heard(now, nixl::detail::silence_watch::limit(cfg_.peer_timeout, period_ms));
  if (!was_watched) {
    if (was_gone) log::info("LIBFABRIC: agent '{}', which sends to this one, is back", to.name);
    note_gone(to.name, false);
  }
}

void engine::check_senders(std::int64_t now) noexcept {
  for (auto& [where, to] : reply_addr_) {
    if (!to.watch.watched() || to.watch.gone) continue;
    const char* why = nullptr;
    if (to.life && !local_hold(to.life.get()).ok())
      why = "its backend in this process was destroyed";
    else if (to.watch.silent(now))
      why = "no heartbeat from it within its limit";
    if (why == nullptr) continue;
    to.watch.gone = true;
    log::info("LIBFABRIC: agent '{}', which sent to this one, is gone ({})", to.name, why);
    note_gone(to.name, true);
  }
}

void engine::note_gone(std::string_view name, bool gone) noexcept {
  if (gone_.note(name, gone) && waker_ != nullptr) waker_->notify();
}

void engine::mark_failed(peer_state* p, std::string_view why) noexcept {
  if (p->is_self) return;
  if (p->failed.exchange(true, std::memory_order_acq_rel)) return;
  log::warn("LIBFABRIC: peer '{}' failed: {}", p->name, why);
  if (!p->closed) note_gone(p->name, true);
  // its operations may never complete: they stop keeping the progress thread polling
  slots_.for_each([&](op_slot& s) {
    if (s.peer == p && s.state() != phase::idle) uncount(&s);
  });
  if (waker_ != nullptr) waker_->notify();  // its requests end now
}

std::size_t engine::progress() noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < rails_.size(); ++i) n += drain(i);
  if (has_retry_.load(std::memory_order_acquire)) run_retries();
  if (!thread_.joinable()) heartbeat();
  return n;
}

void engine::wake() noexcept {
  wake_fd_.signal();
}

void engine::start_thread() {
  wake_fd_.open();
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!wake_fd_ || !epoll_fd_)
    raise(status::backend, "LIBFABRIC: eventfd/epoll_create1 failed: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_.get();
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  for (auto& r : rails_) {
    if (r->wait_fd < 0) continue;
    ev.data.fd = r->wait_fd;
    ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, r->wait_fd, &ev);
  }
  thread_ = std::thread([this] { run(); });
}

void engine::run() noexcept {
  bool fds = true;
  for (auto& r : rails_) fds = fds && r->wait_fd >= 0;
  const std::int64_t spin = std::chrono::nanoseconds(cfg_.progress_spin).count();
  std::int64_t last_work = now_ns();
  nixl::detail::poll_window window;
  while (!stop_.load(std::memory_order_acquire)) {
    const std::size_t n = progress();
    heartbeat();
    if (orphans_.load(std::memory_order_relaxed) == 0) close_deferred(false);
    const std::int64_t now = now_ns();
    // The polled window: an application thread checked a request lately, so its next check
    // posts what a post hands over and wakes this thread (take_up); hand_back ends it at once.
    const bool polled = window.update(polls_, now);
    if (n > 0) last_work = now;
    // While transfers are in flight the thread polls: the tcp and shm providers move data
    // only when their completion queues are read.
    if (n > 0 || active_.load(std::memory_order_acquire) > 0 ||
        has_retry_.load(std::memory_order_acquire)) {
      if (n == 0) std::this_thread::yield();
      continue;
    }
    if (now - last_work < spin) continue;
    const int timeout_ms =
        polled ? nixl::detail::poll_watch::tick_ms
               : static_cast<int>(std::max<std::int64_t>(1, cfg_.heartbeat.count() / 4));
    sleeping_.store(true, std::memory_order_seq_cst);
    bool can_sleep = active_.load(std::memory_order_seq_cst) == 0;
    if (can_sleep && fds) {
      for (auto& r : rails_) {
        fid* f = &r->cq->fid;
        if (fi_trywait(r->fabric, &f, 1) != FI_SUCCESS) {
          can_sleep = false;
          break;
        }
      }
    }
    if (can_sleep) {
      if (fds) {
        epoll_event evs[8];
        const int k = ::epoll_wait(epoll_fd_.get(), evs, 8, timeout_ms);
        for (int i = 0; i < k; ++i) {
          if (evs[i].data.fd == wake_fd_.get()) wake_fd_.drain();
        }
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    sleeping_.store(false, std::memory_order_relaxed);
    last_work = now_ns();
  }
}

}  // namespace nixl::libfabric::detail
