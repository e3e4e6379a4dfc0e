// Transfers: completion slots, prepare (striping over rails, splitting at max_msg_size),
// posting with room checks, the notification after the data, release.

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include <rdma/fi_rma.h>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::libfabric {

namespace detail {

op_slot* engine::acquire_slot() {
  return slots_.acquire([this] {
    auto s = std::make_unique<op_slot>();
    s->owner = this;
    s->notif_ctx.kind = ctx_kind::notif;
    s->notif_ctx.slot = s.get();
    return s;
  });
}

void engine::release_slot(op_slot* s) noexcept {
  s->reset();
  slots_.release(s);
}

void engine::complete(op_slot* s, status st) noexcept {
  const bool ok = s->finish(st);
  uncount(s);
  if (!ok)
    reclaim(s);  // orphaned meanwhile
  else if (waker_ != nullptr)
    waker_->notify();
}

void engine::reclaim(op_slot* s) noexcept {
  orphans_.fetch_sub(1, std::memory_order_acq_rel);
  release_slot(s);
}

void engine::release(op_slot* s) noexcept {
  // A post handed to the progress thread and not taken up yet is canceled whole: libfabric
  // never sees it, and its notification becomes an abort notice.
  if (s->handed.load(std::memory_order_relaxed) &&
      !s->posting.test_and_set(std::memory_order_acquire)) {
    if (s->handed.exchange(false, std::memory_order_relaxed)) {
      s->fail(status::canceled);
      s->next = static_cast<std::uint32_t>(s->chunks.size());
    }
    const bool all_posted = s->next == s->chunks.size();
    s->posting.clear(std::memory_order_release);
    if (all_posted) drop_hold(s);
  }
  if (s->busy()) {
    const auto until = std::chrono::steady_clock::now() + release_grace;
    while (s->busy() && std::chrono::steady_clock::now() < until) {
      if (!thread_.joinable())
        progress();
      else
        std::this_thread::yield();
    }
    if (s->detach()) {
      orphans_.fetch_add(1, std::memory_order_acq_rel);
      return;  // the last completion reclaims it
    }
  }
  release_slot(s);
}

status engine::start(op_slot* s) noexcept {
  // A queued entry of this slot's last request may still reach pump on the progress thread
  // (the request ended through a status check, or release canceled it): the fields that pump
  // reads change only with the posting flag held.
  posting_lock lock(s);
  s->failure.store(0, std::memory_order_relaxed);
  s->next = 0;
  s->notif_due = false;
  s->abort = false;
  s->end = status::success;
  s->outstanding.store(1, std::memory_order_relaxed);
  s->hold.store(true, std::memory_order_relaxed);
  s->counted.store(true, std::memory_order_relaxed);
  active_.fetch_add(1, std::memory_order_seq_cst);
  s->start();
  lock.unlock();
  if (s->on_thread) {
    // The progress thread posts it, or the request's first status check does. While the
    // application polls, that check comes first and wakes the thread itself: a wake-up here
    // would cost this post its core on a busy machine (the woken thread takes it), and the
    // thread, polled, sleeps at most a tick (nixl/detail/poll_watch.hpp).
    s->handed.store(true, std::memory_order_relaxed);
    queue_retry(s);
    if (!polls_.open()) wake_sleeper();
    return s->result();
  }
  wake_sleeper();
  pump(s);
  return s->result();
}

void engine::pump(op_slot* s) noexcept {
  if (s->posting.test_and_set(std::memory_order_acquire)) return;  // another thread posts it
  if (const phase ph = s->state(); ph != phase::busy && ph != phase::orphan) {
    s->posting.clear(std::memory_order_release);  // a stale queued entry: that request ended
    return;
  }
  s->handed.store(false, std::memory_order_relaxed);
  bool requeue = false;
  const std::uint64_t wflags = FI_COMPLETION | rma_flags_;
  int eagain = 0;
  // the peer's connection is not ours to open yet: the progress loop posts later
  if (s->next < s->chunks.size() && !may_send(s->peer)) requeue = true;
  while (!requeue && s->next < s->chunks.size()) {
    if (s->peer->failed.load(std::memory_order_relaxed)) s->fail(status::remote_disconnect);
    if (s->state() == phase::orphan || s->failure.load(std::memory_order_relaxed) != 0) {
      s->next = static_cast<std::uint32_t>(s->chunks.size());  // post no more
      break;
    }
    const chunk& c = s->chunks[s->next];
    iovec iov{c.local, c.len};
    fi_rma_iov riov{c.remote, c.len, c.key};
    void* desc = c.desc;
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = c.dest;
    msg.rma_iov = &riov;
    msg.rma_iov_count = 1;
    msg.context = &s->ctxs[s->next];
    rail& r = *rails_[c.rail];
    s->outstanding.fetch_add(1, std::memory_order_relaxed);
    ssize_t rc;
    {
      local_hold hold(s->peer->local.get());
      if (!hold.ok()) {
        s->outstanding.fetch_sub(1, std::memory_order_relaxed);
        mark_failed(s->peer, "its backend in this process was destroyed");
        continue;  // the loop sees the failure and posts no more
      }
      std::lock_guard lk(r.mu);
      rc = s->write ? fi_writemsg(r.ep, &msg, wflags) : fi_readmsg(r.ep, &msg, FI_COMPLETION);
    }
    if (rc == 0) {
      ++s->next;
      eagain = 0;
      continue;
    }
    s->outstanding.fetch_sub(1, std::memory_order_relaxed);
    if (rc == -FI_EAGAIN) {
      drain(c.rail);
      if (++eagain > 8) {
        requeue = true;  // the queue is full: the progress loop posts the rest
        break;
      }
      continue;
    }
    s->fail(to_status(rc));
    s->next = static_cast<std::uint32_t>(s->chunks.size());
  }
  status finish = status::in_progress;  // completed after the posting flag is clear
  if (!requeue && s->notif_due) {
    const std::optional<status> st = s->peer->failed.load(std::memory_order_relaxed)
                                         ? std::optional<status>(status::remote_disconnect)
                                         : post_notif(s);
    if (!st) {
      requeue = true;
    } else {
      s->notif_due = false;
      finish = *st;
      if (s->abort && finish != status::in_progress) finish = s->end;  // the notice failed
    }
  }
  const bool all_posted = s->next == s->chunks.size();
  s->posting.clear(std::memory_order_release);
  if (finish != status::in_progress) {
    complete(s, finish);
  } else if (requeue) {
    queue_retry(s);
  } else if (all_posted) {
    drop_hold(s);
  }
}

void engine::drop_hold(op_slot* s) noexcept {
  if (s->hold.exchange(false, std::memory_order_acq_rel) &&
      s->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1)
    data_done(s);
}

void engine::data_done(op_slot* s) noexcept {
  const int f = s->failure.load(std::memory_order_relaxed);
  const status end = f != 0 ? static_cast<status>(f) : status::canceled;
  if (f != 0 || s->state() == phase::orphan) {
    // No notification: an abort notice instead (to a peer that lives), now that every write
    // of it has completed; the slot ends with `end` once the notice is sent.
    if (!s->has_notif || s->peer->failed.load(std::memory_order_acquire) ||
        stop_.load(std::memory_order_relaxed)) {
      complete(s, end);
      return;
    }
    // a stale queued entry of this slot may be in pump, which reads these
    const posting_lock lock(s);
    s->abort = true;
    s->end = end;
  } else if (!s->has_notif) {
    complete(s, status::success);
    return;
  }
  const std::optional<status> st = post_notif(s);
  if (!st) {
    posting_lock lock(s);
    s->notif_due = true;
    lock.unlock();
    queue_retry(s);
  } else if (*st != status::in_progress) {
    complete(s, s->abort ? s->end : *st);  // a notice that could not go: the request's end
  }
}

// Header, sender name, message: copied into a registered send buffer, sent on rail 0.
// in_progress: posted; empty: no room now, try again; else the error that ends the request.
std::optional<status> engine::post_notif(op_slot* s) noexcept {
  const std::size_t len = wire::header_size + 2 + agent_name_.size() + s->notif.size();
  if (len > msg_cap_) return status::invalid_param;
  const int i = take_send_buffer();
  if (i < 0) return std::nullopt;
  std::byte* buf = bufs_.get() + msg_cap_ * (cfg_.rx_buffers + static_cast<std::size_t>(i));
  const std::uint32_t magic = wire::msg_magic;
  std::memcpy(buf, &magic, 4);
  buf[4] = std::byte{wire::msg_version};
  buf[5] = std::byte{
      static_cast<std::uint8_t>(s->abort ? wire::msg_type::abort : wire::msg_type::notif)};
  std::memcpy(buf + 6, &uid_, 8);
  const auto nl = static_cast<std::uint16_t>(agent_name_.size());
  std::memcpy(buf + wire::header_size, &nl, 2);
  std::memcpy(buf + wire::header_size + 2, agent_name_.data(), agent_name_.size());
  std::memcpy(buf + wire::header_size + 2 + agent_name_.size(), s->notif.data(), s->notif.size());
  s->notif_ctx.index = static_cast<std::uint32_t>(i);
  rail& r0 = *rails_[0];
  ssize_t rc;
  {
    local_hold hold(s->peer->local.get());
    if (!hold.ok()) {
      give_send_buffer(static_cast<std::uint32_t>(i));
      mark_failed(s->peer, "its backend in this process was destroyed");
      return status::remote_disconnect;
    }
    std::lock_guard lk(r0.mu);
    rc = fi_send(r0.ep, buf, len, bufs_desc_, s->peer->addr[0], &s->notif_ctx);
  }
  if (rc == 0) return status::in_progress;
  give_send_buffer(static_cast<std::uint32_t>(i));
  if (rc == -FI_EAGAIN) return std::nullopt;
  return to_status(rc);
}

void engine::queue_retry(op_slot* s) noexcept {
  std::lock_guard lk(retry_mu_);
  if (std::find(retry_.begin(), retry_.end(), s) == retry_.end()) {
    try {
      retry_.push_back(s);
    } catch (...) {
      // without memory the slot stays unposted; its peer's failure or release ends it
      return;
    }
  }
  has_retry_.store(true, std::memory_order_release);
}

void engine::run_retries() noexcept {
  op_slot* batch[32];
  std::size_t n = 0;
  {
    std::lock_guard lk(retry_mu_);
    n = std::min<std::size_t>(retry_.size(), 32);
    std::copy(retry_.begin(), retry_.begin() + static_cast<std::ptrdiff_t>(n), batch);
    retry_.erase(retry_.begin(), retry_.begin() + static_cast<std::ptrdiff_t>(n));
    has_retry_.store(!retry_.empty(), std::memory_order_release);
  }
  for (std::size_t i = 0; i < n; ++i) pump(batch[i]);
}

}  // namespace detail

void backend::prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer& p) {
  if (p.state == nullptr) raise(status::invalid_param, "LIBFABRIC prepare: no peer");
  if (local.size() != remote.size())
    raise(status::invalid_param, "LIBFABRIC prepare: {} local and {} remote descriptors",
          local.size(), remote.size());
  if (r.slot_ != nullptr && r.slot_->busy())
    raise(status::repost_active, "LIBFABRIC prepare: the request is in flight");
  detail::peer_state* ps = p.state;
  const std::size_t nr = eng_->num_rails();
  std::size_t max_msg = std::size_t{1} << 30;
  for (std::size_t i = 0; i < nr; ++i)
    max_msg = std::min(max_msg, std::max<std::size_t>(eng_->rail_at(i).max_msg, 4096));
  const std::size_t threshold = eng_->cfg().stripe_threshold;

  nixl::detail::recycled_vector<detail::chunk> chunks;
  chunks.reserve(local.size());
  auto add = [&](const bound_desc<region>& l, const bound_desc<remote_region>& m, std::size_t off,
                 std::size_t len, std::uint32_t rail) {
    const region* lr = l.region;
    const remote_region* rr = m.region;
    while (len > 0) {
      const std::size_t n = std::min(len, max_msg);
      detail::chunk c;
      c.local = reinterpret_cast<void*>(l.addr + off);
      c.len = n;
      c.desc = lr->mr.descs[rail];
      c.remote = rr->virt_addr ? m.addr + off : m.addr + off - rr->base;
      c.key = rr->keys[rail % rr->keys.size()];
      c.dest = ps->addr[rail];
      c.rail = rail;
      chunks.push_back(c);
      off += n;
      len -= n;
    }
  };
  for (std::size_t i = 0; i < local.size(); ++i) {
    const auto& l = local[i];
    const auto& m = remote[i];
    if (l.region == nullptr || m.region == nullptr)
      raise(status::invalid_param, "LIBFABRIC prepare: descriptor {} is not bound to a region", i);
    if (m.region->peer != ps)
      raise(status::invalid_param,
            "LIBFABRIC prepare: remote descriptor {} lies in a region of another peer than '{}'", i,
            ps->name);
    if (l.len != m.len)
      raise(status::invalid_param, "LIBFABRIC prepare: descriptor {}: {} local and {} remote bytes",
            i, l.len, m.len);
    if (l.len == 0) continue;
    if (nr > 1 && l.len > threshold) {
      // stripe: nr pieces, 4 KiB aligned, the last takes the rest
      const std::size_t piece = (l.len / nr + 4095) / 4096 * 4096;
      std::size_t off = 0;
      for (std::uint32_t k = 0; k < nr && off < l.len; ++k) {
        const std::size_t n = k + 1 == nr ? l.len - off : std::min(piece, l.len - off);
        add(l, m, off, n, k);
        off += n;
      }
    } else {
      add(l, m, 0, l.len, static_cast<std::uint32_t>(i % nr));
    }
  }
  detail::op_slot* s = r.slot_ != nullptr ? r.slot_ : eng_->acquire_slot();
  const detail::posting_lock lock(s);  // a stale queued entry of it may be in pump
  s->chunks = std::move(chunks);
  s->ctxs.assign(s->chunks.size(), detail::op_ctx{});
  for (detail::op_ctx& c : s->ctxs) {
    c.kind = detail::ctx_kind::rma;
    c.slot = s;
  }
  s->write = op == xfer_op::write;
  s->on_thread = eng_->posts_on_thread(s->chunks.size());
  s->peer = ps;
  s->notif.reserve(256);
  r.slot_ = s;
  r.peer_ = ps;
}

status backend::release(request& r) noexcept {
  if (r.slot_ != nullptr) eng_->release(r.slot_);
  r.slot_ = nullptr;
  r.peer_ = nullptr;
  return status::success;
}

}  // namespace nixl::libfabric
