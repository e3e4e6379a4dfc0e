#pragma once
/// `poll_watch` and `poll_window`: how a transport's progress thread learns that an application
/// thread polls (checks requests, progresses the transport itself), so that it stays out of that
/// thread's way for a short window after the last poll.
///
/// While the window is open a post does not wake the sleeping progress thread: the poller's next
/// check posts or progresses the request sooner than a woken thread would be scheduled, and a
/// wake-up on a busy machine hands the poster's core to the thread (the post then takes a time
/// slice). The progress thread sleeps at most `tick_ns` meanwhile, so nothing waits longer than
/// that if the poller stops without saying so; `hand_back()` (request::wait, before it sleeps)
/// closes the window at the thread's next pass. UCX's driven mode and LIBFABRIC's polled window
/// are both this (docs/ucx.md, docs/libfabric.md).
///
/// The application side (`poll`, `hand_back`, `open`) is shared between threads; the progress
/// thread keeps a `poll_window` per watch and calls `update` once per pass.

#include <atomic>
#include <cstdint>
#include <limits>

namespace nixl::detail {

class poll_watch {
 public:
  /// The progress thread's longest sleep while the window is open.
  static constexpr std::int64_t tick_ns = 1'000'000;
  static constexpr int tick_ms = static_cast<int>(tick_ns / 1'000'000);
  /// How long after the last poll the window stays open.
  static constexpr std::int64_t window_ns = 2 * tick_ns;

  /// A poll by an application thread. Plain load and store, not an atomic increment: a changing
  /// value is all the progress thread needs to see.
  void poll() noexcept {
    polls_.store(polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  /// The polling thread stops (it sleeps until a request ends): the window closes at the
  /// progress thread's next pass. The caller wakes that thread if `open()`.
  void hand_back() noexcept { handed_back_.store(true, std::memory_order_seq_cst); }
  /// Whether the progress thread counts an application thread as polling now (seq_cst: a poster
  /// orders it after publishing its post, as the thread orders its last look at the posts after
  /// closing the window).
  bool open() const noexcept { return open_.load(std::memory_order_seq_cst); }
  /// Polls so far (a test's probe).
  std::uint32_t polls() const noexcept { return polls_.load(std::memory_order_relaxed); }

 private:
  friend class poll_window;
  std::atomic<std::uint32_t> polls_{0};
  std::atomic<bool> handed_back_{false};
  std::atomic<bool> open_{false};
};

/// The progress thread's view of one `poll_watch`.
class poll_window {
 public:
  /// Looks at `w` at `now_ns` (steady clock). `busy`: count it as polled now (UCX: a handed-over
  /// post that an application thread's check is making). Returns whether the window is open;
  /// `changed()` tells whether this call opened or closed it.
  bool update(poll_watch& w, std::int64_t now_ns, bool busy = false) noexcept {
    const std::uint32_t p = w.polls_.load(std::memory_order_relaxed);
    if (w.handed_back_.exchange(false, std::memory_order_seq_cst)) {
      seen_ = p;  // the poller sleeps now: the window closes at once
      last_ = never;
    } else if (p != seen_ || busy) {
      seen_ = p;
      last_ = now_ns;
    }
    const bool o = now_ns - last_ < poll_watch::window_ns;
    changed_ = o != open_;
    if (changed_) {
      open_ = o;
      w.open_.store(o, std::memory_order_seq_cst);
    }
    return o;
  }
  bool open() const noexcept { return open_; }
  bool changed() const noexcept { return changed_; }

 private:
  static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::min() / 2;
  std::uint32_t seen_ = 0;
  std::int64_t last_ = never;
  bool open_ = false;
  bool changed_ = false;
};

}  // namespace nixl::detail
