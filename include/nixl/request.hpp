#pragma once
/// `nixl::request<B>`: a transfer resolved once, posted and polled with direct calls into its
/// backend. No virtual call, no allocation and no map lookup on post or status.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <nixl/concepts.hpp>
#include <nixl/detail/region_pin.hpp>
#include <nixl/detail/request_links.hpp>
#include <nixl/detail/sync.hpp>
#include <nixl/detail/waker.hpp>
#include <nixl/log.hpp>
#include <nixl/telemetry.hpp>
#include <nixl/telemetry_export.hpp>

namespace nixl {

template <class... Backends>
class agent;

namespace detail {
/// What a request knows of its peer: whether it is still loaded, and its generation.
struct peer_token {
  std::string name;
  std::uint64_t generation = 0;
  bool self = false;
  std::atomic<bool> valid{true};
  std::atomic<bool> disconnected{false};
  std::atomic<bool> restarted{false};  ///< replaced by a new incarnation under its name
};
}  // namespace detail

/// A transfer request on backend `B`. Move-only; must not be moved while in progress. Releasing
/// (or destroying) it cancels what is in flight. It may outlive its agent: destroying the agent
/// releases it, and it then answers as a released request.
template <backend B>
class request {
 public:
  // User-provided, so that value-initialising a request (emplacing it in an xfer_request) runs
  // the member initialisers only instead of first zeroing the whole object.
  request() noexcept {}  // NOLINT(modernize-use-equals-default)
  request(request&& o) noexcept { steal(o); }
  request& operator=(request&& o) noexcept {
    if (this != &o) {
      (void)release();
      unlink();  // also when the backend could not cancel: the list then holds `o`'s place
      steal(o);
    }
    return *this;
  }
  request(const request&) = delete;
  request& operator=(const request&) = delete;
  ~request() {
    if (release() == nixl::status::repost_active) {
      log::error("request to '{}' destroyed while its backend could not cancel it",
                 peer_ ? peer_->name : std::string{});
      unlink();
    }
  }

  /// Starts (or restarts) the transfer with the notification given at creation or last post.
  /// Returns `success` when done inline, `in_progress`, or an error: `repost_active` while the
  /// previous post is still running, `not_found` when the peer was invalidated or when memory
  /// it points into was deregistered, `remote_disconnect` when it restarted, `xfer_stalled` for a
  /// request that stalled (it holds no backend state any longer: make a new request).
  nixl::status post() noexcept {
    if (engine_ == nullptr)
      return status_ == nixl::status::xfer_stalled ? status_ : nixl::status::invalid_param;
    auto g = lock_->shared();
    if (status_ == nixl::status::in_progress) {
      if (canceling_) return count(nixl::status::repost_active);  // a stall's cancel runs
      status_ = engine_->check(state_);
      if (status_ == nixl::status::in_progress) return count(nixl::status::repost_active);
    }
    if (!peer_->valid.load(std::memory_order_acquire)) return count(status_ = gone());
    if (const auto e = detail::retire_epoch().load(std::memory_order_acquire); e != checked_epoch_)
        [[unlikely]] {
      if ((pins_ && pins_->stale()) || (more_pins_ && more_pins_->stale())) {
        log::error("request to '{}': memory it points into was deregistered; make a new request",
                   peer_->name);
        return count(status_ = nixl::status::not_found);
      }
      checked_epoch_ = e;
    }
    // The post's time, for telemetry and the stall timeout: just before the backend's post,
    // so that a refused repost does not move it.
    if (stall_timeout_.count() > 0 || telemetry_on_) [[unlikely]]
      telem_.start = std::chrono::steady_clock::now();
    status_ = engine_->post(state_, has_notif_ ? notif_arg{notif_} : notif_arg{});
    spin_due_ = true;  // the first wait() after this post may spin
    after(true);
    return status_;
  }

  /// Posts with notification `n` (or none when `n` is empty), replacing the stored one. The
  /// message is copied into the request's storage: up to 15 bytes, the capacity reserved at
  /// creation (`xfer_options::notif_capacity`) or the longest message it held before never
  /// allocate; a longer one does, once.
  nixl::status post(notif_arg n) noexcept {
    has_notif_ = n.has_value();
    if (n) {
      try {
        notif_.assign(n->data(), n->size());
      } catch (...) {
        return nixl::status::backend;
      }
    }
    return post();
  }

  /// Polls the transfer: `success`, `in_progress`, `not_posted` before the first post, or an
  /// error. Terminal states are sticky until the next post.
  ///
  /// With a stall timeout (`agent_config::xfer_stall_timeout`, `xfer_options::stall_timeout`),
  /// a poll that finds the backend still in progress longer than the timeout after the post
  /// cancels the backend's work (its release path) and answers `xfer_stalled` once the backend
  /// has let go of the request, `in_progress` until then. A stalled request holds no backend
  /// state: `xfer_stalled` is sticky, post answers it again, release answers `success`.
  nixl::status status() noexcept {
    if (status_ != nixl::status::in_progress) return status_;
    auto g = lock_->shared();
    if (!peer_->valid.load(std::memory_order_acquire)) return count(status_ = gone());
    // While a cancel is under way the backend's answer is release's, not check's.
    status_ = canceling_ ? nixl::status::in_progress : engine_->check(state_);
    if (stall_timeout_.count() > 0 && status_ == nixl::status::in_progress) [[unlikely]]
      check_stall();
    after(false);
    return status_;
  }

  /// Where the transfer stands from what its backend already knows, without making progress:
  /// for a thread that sleeps on the agent's event fd with many requests in flight and looks at
  /// each after a wake-up, where status() would drive the transport once per request (a system
  /// call each over TCP). `in_progress` while the backend's completion record says so (this
  /// thread is then taken as not driving the transport: the backend's progress thread moves the
  /// request and signals the fd when it ends); else what status() answers, which records the
  /// end. A backend that cannot be read without progress, or does not signal the fd now, gets
  /// status(); so does a request past its stall timeout, which status() acts on. Never throws.
  nixl::status peek() noexcept {
    if (status_ != nixl::status::in_progress) return status_;
    if constexpr (peeking_backend<B>) {
      bool wakes = true;
      if constexpr (waking_backend<B>) wakes = engine_->wakes_waiters();
      if (wakes && !canceling_ && !past_stall()) {
        auto g = lock_->shared();
        if (!record_ended()) {
          if constexpr (handing_backend<B>) engine_->hand_back(state_);
          return nixl::status::in_progress;
        }
      }
    }
    return status();
  }

  /// Cancels what is in flight and frees backend resources. Returns `repost_active` (and keeps
  /// the request) when the backend cannot cancel it; `success` otherwise. A released request
  /// keeps nothing of its backend, peer or regions: post and status say `invalid_param`.
  nixl::status release() noexcept {
    if (engine_ == nullptr) {
      peer_.reset();  // what a stalled request kept for remote_agent()
      unlink();
      status_ = status_ == nixl::status::not_posted ? status_ : nixl::status::invalid_param;
      return nixl::status::success;
    }
    auto g = lock_->shared();
    if (status_ == nixl::status::in_progress) status_ = engine_->check(state_);
    const auto s = engine_->release(state_);
    if (s == nixl::status::repost_active) return s;
    let_go();
    return nixl::status::success;
  }

  /// Waits until the transfer ends or `timeout` passes: returns what status() returns once it
  /// ended, `in_progress` at the deadline, and status() at once when nothing is in flight. It
  /// sleeps on the agent's event fd, after polling for up to `agent_config::wait_spin` in the
  /// first wait after a post of at most wait_spin_max_bytes; a backend that learns of completion
  /// only when asked (not a waking_backend, or one that says it does not wake now) is re-checked
  /// every 10 µs, doubling to 1 ms (docs/waiting.md). Never throws.
  nixl::status wait(std::chrono::nanoseconds timeout) noexcept {
    if (status_ != nixl::status::in_progress || waker_ == nullptr) return status();
    const auto deadline = detail::waker::deadline_after(timeout);
    bool wakes = false;
    if constexpr (waking_backend<B>) wakes = engine_->wakes_waiters();
    if constexpr (peeking_backend<B>) {
      if (wakes && spin_due_ && wait_spin_.count() > 0 &&
          telem_.total_bytes <= wait_spin_max_bytes) {
        // A short transfer ends within microseconds: polled here, it is seen at once, where
        // the fd would cost two thread wake-ups (the progress thread's, then this one's).
        // Polls through check(), which progresses the worker from this thread: polling the
        // completion record alone (peek) left the 4 KiB case to the woken progress thread.
        spin_due_ = false;
        const auto until = std::min(deadline, detail::waker::clock::now() + wait_spin_);
        while (status() == nixl::status::in_progress && detail::waker::clock::now() < until) {
        }
        if (status_ != nixl::status::in_progress) return status_;
      }
      if (wakes) {
        // This thread may have driven the worker (its spin, or status polls before this wait):
        // the progress thread takes it back now, not after its driven window.
        if constexpr (handing_backend<B>) engine_->hand_back(state_);
        // Peek, not check: a check would make progress from this thread, and a transport's
        // progress thread leaves a worker alone while an application thread drives it.
        // A stall timeout ends the peeking wait at its deadline: past it, the polled wait below
        // lets status() cancel the request.
        auto until = deadline;
        if (stall_timeout_.count() > 0)
          until = std::min(until, std::chrono::time_point_cast<detail::waker::clock::duration>(
                                      stall_deadline()));
        const bool ended = waker_->wait_until([&] { return record_ended(); }, until);
        if (ended) return status();
        if (until == deadline) return status_;
      }
    }
    waker_->wait_until([&] { return status() != nixl::status::in_progress; }, deadline, !wakes);
    return status_;
  }

  /// Copies the request's telemetry; `no_telemetry` when disabled, the request status when it
  /// has not completed.
  nixl::status telemetry(xfer_telemetry& out) const noexcept {
    if (!telemetry_on_) return nixl::status::no_telemetry;
    if (status_ != nixl::status::success) return status_;
    out = telem_;
    return nixl::status::success;
  }

  /// wait() spins only for requests of at most this many bytes: a larger one cannot end
  /// within a spin at today's transport rates, and its polls contend with the progress thread
  /// that moves it (measured at 64 MiB: twice the waiting thread's CPU, no latency gained).
  static constexpr std::size_t wait_spin_max_bytes = std::size_t{1} << 20;

  /// True while the request holds a backend request.
  bool valid() const noexcept { return engine_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }
  /// Name of the remote agent (the agent's own name for loopback).
  std::string_view remote_agent() const noexcept {
    return peer_ ? std::string_view(peer_->name) : std::string_view{};
  }
  std::uint64_t remote_generation() const noexcept { return peer_ ? peer_->generation : 0; }
  xfer_op op() const noexcept { return op_; }
  /// Name of the backend that moves this request.
  static constexpr std::string_view backend_name() noexcept { return B::name; }
  /// Descriptors handed to the backend (after merging).
  std::size_t descriptor_count() const noexcept { return backend_descs_; }
  std::size_t total_bytes() const noexcept { return telem_.total_bytes; }
  /// The backend that moves this request, and its per-request state.
  B& engine() const noexcept { return *engine_; }
  typename B::request& backend_state() noexcept { return state_; }
  const typename B::request& backend_state() const noexcept { return state_; }

 private:
  /// Whether the backend's completion record (peek, no progress) says the request ended, or
  /// its peer is gone: what wait() and peek() read before they ask status().
  bool record_ended() const noexcept requires peeking_backend<B> {
    return !peer_->valid.load(std::memory_order_acquire) ||
           engine_->peek(state_) != nixl::status::in_progress;
  }
  template <class... Bs>
  friend class agent;

  /// A peer no longer loaded: `remote_disconnect` when it restarted, else `not_found`
  /// (invalidated, or pruned after its failure was reported).
  nixl::status gone() const noexcept {
    return peer_->restarted.load(std::memory_order_acquire) ? nixl::status::remote_disconnect
                                                            : nixl::status::not_found;
  }

  void after(bool posted) noexcept {
    if (status_ == nixl::status::remote_disconnect) {
      peer_->disconnected.store(true, std::memory_order_release);
      peer_->valid.store(false, std::memory_order_release);
    }
    if (!telemetry_on_) return;
    const auto now = std::chrono::steady_clock::now();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now - telem_.start);
    if (posted) telem_.post_duration = us;
    if (status_ == nixl::status::success) telem_.xfer_duration = us;
    if (tsink_ == nullptr) return;
    if (status_ == nixl::status::success)
      tsink_->completion(op_ == xfer_op::write, telem_.total_bytes,
                         static_cast<std::uint64_t>(telem_.xfer_duration.count()),
                         static_cast<std::uint64_t>(telem_.post_duration.count()));
    else if (static_cast<int>(status_) < 0)
      tsink_->error(status_);
  }

  /// When a request still in progress counts as stalled (with a stall timeout): its post's time
  /// plus the timeout. peek(), wait() and check_stall() all go by it.
  std::chrono::steady_clock::time_point stall_deadline() const noexcept {
    return telem_.start + stall_timeout_;
  }
  /// Past the stall deadline now; false without a stall timeout.
  bool past_stall() const noexcept {
    return stall_timeout_.count() > 0 && std::chrono::steady_clock::now() > stall_deadline();
  }

  /// The stall check of status(), with the backend in progress: past the deadline, cancels
  /// through the backend's release and reports `xfer_stalled` when the backend has let go.
  void check_stall() noexcept {
    const auto now = std::chrono::steady_clock::now();
    if (now <= stall_deadline()) return;
    // Release cancels what the backend can; repost_active: something still runs that it
    // could not take back yet, so the request stays in progress and the next poll asks again.
    canceling_ = true;
    if (engine_->release(state_) == nixl::status::repost_active) return;
    canceling_ = false;
    log::error(
        "request to '{}' on {}: not complete {} us after its post (stall timeout {} us); "
        "canceled, {}",
        peer_->name, B::name,
        std::chrono::duration_cast<std::chrono::microseconds>(now - telem_.start).count(),
        stall_timeout_.count(), nixl::status::xfer_stalled);
    engine_ = nullptr;
    pins_.reset();
    more_pins_.reset();
    status_ = nixl::status::xfer_stalled;
  }

  /// Counts an error status returned without reaching the backend (as after() does).
  nixl::status count(nixl::status s) noexcept {
    if (tsink_ != nullptr) tsink_->error(s);
    return s;
  }

  /// Keeps nothing of its backend, peer, regions or agent (the end of a release).
  void let_go() noexcept {
    engine_ = nullptr;
    peer_.reset();
    pins_.reset();
    more_pins_.reset();
    unlink();
    status_ = nixl::status::invalid_param;  // status() of a released request touches nothing
  }

  /// Off its agent's list (released: it holds nothing of the agent any more).
  void unlink() noexcept {
    if (link_.owner != nullptr) [[likely]]
      link_.owner->remove(link_);
  }

  /// Its agent is being destroyed: releases the request now, while the backend exists. A
  /// backend that cannot cancel yet is asked again for up to a second; past that the request
  /// lets go of it anyway (the backend then ends that work as it is destroyed).
  static void agent_gone(void* self) noexcept {
    auto& r = *static_cast<request*>(self);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (r.release() == nixl::status::repost_active) {
      if (std::chrono::steady_clock::now() >= until) {
        log::error("request to '{}' on {}: still running when its agent was destroyed; abandoned",
                   r.peer_ ? r.peer_->name : std::string{}, B::name);
        r.let_go();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    r.lock_ = nullptr;
    r.waker_ = nullptr;
    r.tsink_ = nullptr;
  }

  void steal(request& o) noexcept {
    if (o.link_.owner != nullptr) o.link_.owner->replace(o.link_, link_);
    engine_ = std::exchange(o.engine_, nullptr);
    lock_ = o.lock_;
    peer_ = std::move(o.peer_);
    pins_ = std::move(o.pins_);
    more_pins_ = std::move(o.more_pins_);
    checked_epoch_ = o.checked_epoch_;
    std::destroy_at(&state_);
    std::construct_at(&state_, std::move(o.state_));
    status_ = std::exchange(o.status_, nixl::status::not_posted);
    op_ = o.op_;
    has_notif_ = o.has_notif_;
    notif_ = std::move(o.notif_);
    telemetry_on_ = o.telemetry_on_;
    tsink_ = o.tsink_;
    telem_ = o.telem_;
    backend_descs_ = o.backend_descs_;
    stall_timeout_ = o.stall_timeout_;
    wait_spin_ = o.wait_spin_;
    spin_due_ = o.spin_due_;
    canceling_ = std::exchange(o.canceling_, false);
    waker_ = o.waker_;
  }

  B* engine_ = nullptr;
  /// On its agent's list from creation until released (request_links).
  detail::request_link link_{this, &request::agent_gone};
  const detail::agent_lock* lock_ = nullptr;
  std::shared_ptr<detail::peer_token> peer_;
  /// Keep the backend registrations this request points into alive (see
  /// agent::deregister_memory); released with the request.
  detail::region_pin pins_;
  detail::region_pin more_pins_;
  std::uint64_t checked_epoch_ = 0;  ///< retire_epoch() when the pins were last found fresh
  typename B::request state_{};
  nixl::status status_ = nixl::status::not_posted;
  xfer_op op_ = xfer_op::write;
  bool has_notif_ = false;
  bool telemetry_on_ = false;
  bool canceling_ = false;  ///< past the stall timeout, the backend's release not done yet
  bool spin_due_ = false;   ///< no wait() since the last post: the next may spin
  detail::telemetry_sink* tsink_ = nullptr;  ///< the agent's, when its events are exported
  std::string notif_;
  xfer_telemetry telem_{};
  std::size_t backend_descs_ = 0;
  std::chrono::microseconds stall_timeout_{0};  ///< 0: no stall check
  std::chrono::microseconds wait_spin_{0};      ///< agent_config::wait_spin
  detail::waker* waker_ = nullptr;              ///< the agent's, for wait()
};

}  // namespace nixl
