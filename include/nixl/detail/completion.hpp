#pragma once
/// The completion machinery every backend shares: where one request stands (`completion`:
/// its phase and result, set by whoever finishes it and read by the request's owner without a
/// lock) and where such records live (`slot_pool`: stable addresses for as long as the engine
/// lives, so a late callback of a transport never touches freed memory even when the request
/// that posted it is gone).
///
/// The phases of a request:
///
///     idle --start--> busy --finish(s)--> done --reset--> idle
///                      |
///                      +--detach--> orphan --finish(s): false (the finisher reclaims it)
///
/// `end(s)` sets done with `s` from any phase, for a request that its owner alone drives (one
/// that ends inside the owner's call, or before anything else holds it).
///
/// `orphan` is a request released while its transport still holds operations of it: the last
/// completion hands the record back to its pool, and no notification goes out.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <nixl/detail/status.hpp>

namespace nixl::detail {

/// Where a request is, as its completion record says.
enum class phase : std::uint8_t {
  idle,    ///< not posted (or released)
  busy,    ///< posted: the transport holds it
  done,    ///< ended; `result()` says how
  orphan,  ///< released while the transport still held it
};

/// Phase and result of one request. Any thread may finish it; its owner reads it lock-free.
class completion {
 public:
  completion() noexcept = default;
  /// A copy of the phase and result, for a record that only its owner touches at the time (a
  /// request moved while nothing of it is in flight).
  completion(const completion& o) noexcept
      : phase_(o.state()), result_(o.result_.load(std::memory_order_relaxed)) {}
  completion& operator=(const completion& o) noexcept {
    result_.store(o.result_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    phase_.store(o.state(), std::memory_order_release);
    return *this;
  }

  /// idle or done -> busy (a post).
  void start() noexcept {
    result_.store(static_cast<int>(status::success), std::memory_order_relaxed);
    phase_.store(phase::busy, std::memory_order_release);
  }

  /// busy -> done with `s`. False when the request was orphaned meanwhile: the caller then
  /// hands the record back to its pool.
  [[nodiscard]] bool finish(status s) noexcept {
    result_.store(static_cast<int>(s), std::memory_order_relaxed);
    phase expected = phase::busy;
    return phase_.compare_exchange_strong(expected, phase::done, std::memory_order_acq_rel) ||
           expected != phase::orphan;
  }

  /// busy -> orphan. False when the request is not busy (it ended, or was never posted).
  [[nodiscard]] bool detach() noexcept {
    phase expected = phase::busy;
    return phase_.compare_exchange_strong(expected, phase::orphan, std::memory_order_acq_rel);
  }

  /// Any phase -> done with `s`, which it returns: for a record that nothing else may finish or
  /// detach at the same time (a request that ends inside its owner's call).
  status end(status s) noexcept {
    result_.store(static_cast<int>(s), std::memory_order_relaxed);
    phase_.store(phase::done, std::memory_order_release);
    return s;
  }

  /// Back to idle (after release, or before the record is reused).
  void reset() noexcept { phase_.store(phase::idle, std::memory_order_release); }

  phase state() const noexcept { return phase_.load(std::memory_order_acquire); }
  bool busy() const noexcept { return state() == phase::busy; }
  bool ended() const noexcept { return state() == phase::done; }

  /// What a status query answers: `in_progress` while busy, the result once done,
  /// `not_posted` while idle or orphaned.
  status result() const noexcept {
    switch (state()) {
      case phase::busy:
        return status::in_progress;
      case phase::done:
        return static_cast<status>(result_.load(std::memory_order_relaxed));
      case phase::idle:
      case phase::orphan:
        break;
    }
    return status::not_posted;
  }

 private:
  std::atomic<phase> phase_{phase::idle};
  std::atomic<int> result_{static_cast<int>(status::success)};
};

/// Where the request of record `c` stands, without progressing anything: `in_progress` while
/// busy (`remote_disconnect` when its peer is known dead), else its result; `invalid_param`
/// without a record. What a backend's `peek` answers (request::wait after a wake-up).
inline status peek(const completion* c, bool peer_failed) noexcept {
  if (c == nullptr) return status::invalid_param;
  if (c->busy()) return peer_failed ? status::remote_disconnect : status::in_progress;
  return c->result();
}

/// Records of type `Slot` with stable addresses, created on demand and reused; they live as
/// long as the pool. `acquire` may allocate; `release` never does and never throws.
template <class Slot>
class slot_pool {
 public:
  /// A free record, or a new one made by `make()` (which returns a `std::unique_ptr<Slot>`).
  template <class Make>
  Slot* acquire(Make&& make) {
    std::lock_guard lk(mu_);
    if (Slot* s = pop_locked()) return s;
    std::unique_ptr<Slot> s = make();
    free_.reserve(all_.size() + 1);  // so that release never allocates
    all_.push_back(std::move(s));
    return all_.back().get();
  }
  Slot* acquire() {
    return acquire([] { return std::make_unique<Slot>(); });
  }
  /// A free record, or nullptr when none is: never makes one (a pool of fixed size).
  Slot* try_acquire() noexcept {
    std::lock_guard lk(mu_);
    return pop_locked();
  }

  /// Hands `s` back for reuse.
  void release(Slot* s) noexcept {
    std::lock_guard lk(mu_);
    free_.push_back(s);
  }

  /// Records made so far, and those now free.
  std::size_t size() const {
    std::lock_guard lk(mu_);
    return all_.size();
  }
  std::size_t free_count() const {
    std::lock_guard lk(mu_);
    return free_.size();
  }

  /// Calls `f(slot)` for every record made so far (free or not), under the pool's lock.
  template <class F>
  void for_each(F&& f) const {
    std::lock_guard lk(mu_);
    for (const auto& s : all_) f(*s);
  }

 private:
  Slot* pop_locked() noexcept {
    if (free_.empty()) return nullptr;
    Slot* s = free_.back();
    free_.pop_back();
    return s;
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> all_;
  std::vector<Slot*> free_;
};

}  // namespace nixl::detail
