#pragma once
/// `waker`: the one file descriptor of an agent that becomes readable when a request of that
/// agent ends or a notification arrives (an eventfd), and the waits built on it.
///
/// Who signals: the threads that finish requests or queue notifications (a transport's
/// progress thread, a worker pool, the kernel through io_uring's eventfd) call `notify()`.
/// It costs a fence and a load while nobody waits (no waiter is armed) and while a signal is
/// already pending (not drained yet); otherwise one write(2).
///
/// Who waits: `wait_until(done, deadline)` (request::wait, agent::wait_notifications) arms the
/// waker, drains the fd, evaluates `done` and sleeps in poll(2) until the fd is readable or the
/// deadline; an event loop takes the fd from `share()` (agent::event_fd), which keeps the
/// waker armed for good, and calls `drain()` before it looks at what it waits for.
///
/// Why no wake-up is lost: a notifier publishes its event (the completion record's phase, a
/// queued notification) and then issues a seq_cst fence before it reads `armed_` and
/// `signalled_`; a waiter bumps `armed_` or clears `signalled_` and issues a seq_cst fence
/// before it evaluates `done`. Whichever fence comes first in the single total order, either
/// the notifier sees the waiter (and writes) or the waiter sees the event.
///
/// Several waiters share one counter: the first to drain it takes the signal for all. A waiter
/// that is not alone (another thread in wait_until, or a shared fd) therefore sleeps in slices
/// of at most `shared_slice` and re-evaluates, so that a signal taken by another thread costs
/// it that much latency at most, never its deadline.

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

#include <nixl/detail/event_fd.hpp>
#include <nixl/detail/status.hpp>

namespace nixl::detail {

class waker {
 public:
  using clock = std::chrono::steady_clock;
  /// The longest sleep of a waiter that shares the fd with others.
  static constexpr std::chrono::nanoseconds shared_slice = std::chrono::milliseconds(1);
  /// Re-check interval of a polled wait: starts at `poll_first`, doubles up to `poll_last`.
  static constexpr std::chrono::nanoseconds poll_first = std::chrono::microseconds(10);
  static constexpr std::chrono::nanoseconds poll_last = std::chrono::milliseconds(1);

  /// Throws `nixl::error(backend)` when no eventfd can be made (the process is out of fds).
  waker() {
    if (!fd_.open())
      raise(status::backend, "agent: eventfd(EFD_NONBLOCK | EFD_CLOEXEC): {}; raise RLIMIT_NOFILE",
            std::strerror(errno));
  }
  waker(const waker&) = delete;
  waker& operator=(const waker&) = delete;

  /// The eventfd (for a backend that hands it to the kernel, e.g. io_uring_register_eventfd).
  int fd() const noexcept { return fd_.get(); }

  /// The eventfd for an event loop (epoll, poll, asyncio's add_reader): from now on every event
  /// signals it. The reader calls `drain()`, then looks at its requests and notifications.
  int share() noexcept {
    if (!shared_.exchange(true, std::memory_order_acq_rel))
      armed_.fetch_add(1, std::memory_order_seq_cst);
    return fd_.get();
  }
  bool shared() const noexcept { return shared_.load(std::memory_order_acquire); }

  /// An event happened (after it was published): make the fd readable if anyone may wait.
  void notify() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (armed_.load(std::memory_order_relaxed) == 0) return;
    if (signalled_.load(std::memory_order_relaxed) ||
        signalled_.exchange(true, std::memory_order_acq_rel))
      return;
    fd_.signal();
  }

  /// Empties the counter; afterwards the caller must look at what it waits for.
  void drain() noexcept {
    fd_.drain();
    signalled_.store(false, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  /// Waits until `done()` is true or `deadline` passes; returns the last `done()`. With
  /// `polled`, `done()` is also re-evaluated at intervals (poll_first doubling to poll_last),
  /// for events that nobody signals (a backend that learns of completion only when asked).
  template <class Done>
  bool wait_until(Done&& done, clock::time_point deadline, bool polled = false) noexcept {
    armed_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::chrono::nanoseconds pause = poll_first;
    bool ok = false;
    for (;;) {
      drain();
      if ((ok = done())) break;
      const auto now = clock::now();
      if (now >= deadline) break;
      std::chrono::nanoseconds left = deadline - now;
      if (armed_.load(std::memory_order_relaxed) > 1) left = std::min(left, shared_slice);
      if (polled) {
        left = std::min(left, pause);
        pause = std::min(pause * 2, poll_last);
      }
      sleep_for(left);
    }
    armed_.fetch_sub(1, std::memory_order_seq_cst);
    return ok;
  }
  template <class Done>
  bool wait_for(Done&& done, std::chrono::nanoseconds timeout, bool polled = false) noexcept {
    return wait_until(static_cast<Done&&>(done), deadline_after(timeout), polled);
  }

  /// now + `timeout`, saturating (a huge timeout waits for ever, it does not overflow).
  static clock::time_point deadline_after(std::chrono::nanoseconds timeout) noexcept {
    const auto now = clock::now();
    if (timeout <= std::chrono::nanoseconds::zero()) return now;
    if (timeout >= clock::time_point::max() - now) return clock::time_point::max();
    return now + std::chrono::duration_cast<clock::duration>(timeout);
  }

  /// Waiters armed now (in wait_until, plus one for a shared fd): a diagnostic.
  int armed() const noexcept { return armed_.load(std::memory_order_relaxed); }

 private:
  /// Sleeps until the fd is readable or `d` passed (ppoll: nanosecond resolution).
  void sleep_for(std::chrono::nanoseconds d) const noexcept {
    pollfd p{fd_.get(), POLLIN, 0};
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(d);
    const timespec ts{static_cast<time_t>(s.count()), static_cast<long>((d - s).count())};
    (void)::ppoll(&p, 1, &ts, nullptr);  // EINTR: the loop re-evaluates
  }

  event_fd fd_;
  std::atomic<int> armed_{0};
  std::atomic<bool> signalled_{false};
  std::atomic<bool> shared_{false};
};

}  // namespace nixl::detail
