#pragma once
/// The agent's lock: nothing in `none` mode, one exclusive lock in `strict`, reader/writer in
/// `rw`, where readers on different threads do not share a cache line (`sharded_rw_mutex`).

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <utility>

#include <nixl/detail/concepts.hpp>
#include <nixl/detail/thread_index.hpp>

namespace nixl::detail {

/// A reader/writer lock whose readers touch only a cache line of their own while no writer
/// runs. Each thread counts itself in one of `slot_count` reader slots (threads numbered in
/// order of first use, modulo the count); a writer takes `writers_`, raises `writing_` and waits
/// until every slot is empty; a reader that finds the flag raised steps back out of its slot
/// and blocks on `writers_` until the writer is done. Writers are preferred. Not recursive.
///
/// The reader's increment and the writer's flag are both sequentially consistent, so that of a
/// reader entering and a writer entering at once at least one sees the other (as in Dekker's
/// algorithm); the reader's fast path is one atomic add on its own line and one load of a line
/// that only writers change.
class sharded_rw_mutex {
 public:
  static constexpr std::size_t slot_count = 32;

  /// The slot of the calling thread.
  static std::size_t this_thread_slot() noexcept { return thread_index() % slot_count; }

  /// Enters as a reader in slot `s` (`this_thread_slot()`); pass the same `s` to unlock_shared.
  void lock_shared(std::size_t s) noexcept {
    auto& count = slots_[s].readers;
    for (;;) {
      count.fetch_add(1, std::memory_order_seq_cst);
      if (!writing_.load(std::memory_order_seq_cst)) return;
      count.fetch_sub(1, std::memory_order_release);
      writers_.lock_shared();  // returns once the writer is done
      writers_.unlock_shared();
    }
  }
  void unlock_shared(std::size_t s) noexcept {
    slots_[s].readers.fetch_sub(1, std::memory_order_release);
  }

  void lock() noexcept {
    writers_.lock();
    writing_.store(true, std::memory_order_seq_cst);
    for (auto& slot : slots_)
      for (unsigned spins = 0; slot.readers.load(std::memory_order_seq_cst) != 0; ++spins) {
        // Readers hold a slot for one data-path call: yield, then sleep for long ones (making a
        // request of a million descriptors takes tens of milliseconds).
        if (spins < 64)
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
  }
  void unlock() noexcept {
    writing_.store(false, std::memory_order_release);
    writers_.unlock();
  }

 private:
  struct alignas(64) slot {
    std::atomic<std::size_t> readers{0};
  };
  std::array<slot, slot_count> slots_{};
  alignas(64) std::atomic<bool> writing_{false};
  std::shared_mutex writers_;
};

class agent_lock {
 public:
  class guard {
   public:
    guard() = default;
    guard(guard&& o) noexcept
        : lock_(std::exchange(o.lock_, nullptr)), held_(o.held_), slot_(o.slot_) {}
    guard& operator=(guard&&) = delete;
    ~guard() {
      if (lock_ != nullptr) unlock();
    }

   private:
    friend class agent_lock;
    enum class held : unsigned char { exclusive, rw_exclusive, rw_shared };
    guard(const agent_lock* l, held h, std::size_t slot = 0) noexcept
        : lock_(l), held_(h), slot_(slot) {}
    void unlock() noexcept {
      switch (held_) {
        case held::exclusive:
          lock_->m_.unlock();
          break;
        case held::rw_exclusive:
          lock_->rw_->unlock();
          break;
        case held::rw_shared:
          lock_->rw_->unlock_shared(slot_);
          break;
      }
    }
    const agent_lock* lock_ = nullptr;
    held held_ = held::exclusive;
    std::size_t slot_ = 0;
  };

  explicit agent_lock(thread_sync mode = thread_sync::none) { set_mode(mode); }

  thread_sync mode() const noexcept { return mode_; }
  /// Changes the mode; only while no other thread uses the agent (construction).
  void set_mode(thread_sync m) {
    if (m == thread_sync::rw && !rw_) rw_ = std::make_unique<sharded_rw_mutex>();
    mode_ = m;
  }

  /// Control path: exclusive in `strict` and `rw`.
  [[nodiscard]] guard exclusive() const noexcept {
    switch (mode_) {
      case thread_sync::none:
        return {};
      case thread_sync::strict:
        m_.lock();
        return {this, guard::held::exclusive};
      case thread_sync::rw:
        rw_->lock();
        return {this, guard::held::rw_exclusive};
    }
    return {};
  }
  /// Data path: shared in `rw` (on the calling thread's reader slot), exclusive in `strict`.
  [[nodiscard]] guard shared() const noexcept {
    if (mode_ == thread_sync::none) return {};  // the common case stays inline
    return lock_shared();
  }

 private:
  // Out of line: inlined into every post and status it would cost the none mode registers.
  // `none` and `strict` lock as the control path does; only `rw` has a shared mode.
  [[gnu::noinline]] guard lock_shared() const noexcept {
    if (mode_ != thread_sync::rw) return exclusive();
    const auto s = sharded_rw_mutex::this_thread_slot();
    rw_->lock_shared(s);
    return {this, guard::held::rw_shared, s};
  }

  thread_sync mode_ = thread_sync::none;
  mutable std::mutex m_;
  std::unique_ptr<sharded_rw_mutex> rw_;
};

}  // namespace nixl::detail
