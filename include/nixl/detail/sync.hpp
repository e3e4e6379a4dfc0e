#pragma once
/// The agent's lock: nothing in `none` mode, one exclusive lock in `strict`, reader/writer in `rw`.

#include <shared_mutex>
#include <utility>

#include <nixl/concepts.hpp>

namespace nixl::detail {

class agent_lock {
 public:
  class guard {
   public:
    guard() = default;
    guard(std::shared_mutex* m, bool exclusive) noexcept : m_(m), exclusive_(exclusive) {}
    guard(guard&& o) noexcept : m_(std::exchange(o.m_, nullptr)), exclusive_(o.exclusive_) {}
    guard& operator=(guard&&) = delete;
    ~guard() {
      if (m_ == nullptr) return;
      if (exclusive_)
        m_->unlock();
      else
        m_->unlock_shared();
    }

   private:
    std::shared_mutex* m_ = nullptr;
    bool exclusive_ = false;
  };

  explicit agent_lock(thread_sync mode = thread_sync::none) noexcept : mode_(mode) {}

  thread_sync mode() const noexcept { return mode_; }
  /// Changes the mode; only while no other thread uses the agent (construction).
  void set_mode(thread_sync m) noexcept { mode_ = m; }

  /// Control path: exclusive in `strict` and `rw`.
  [[nodiscard]] guard exclusive() const noexcept {
    if (mode_ == thread_sync::none) return {};
    m_.lock();
    return {&m_, true};
  }
  /// Data path: shared in `rw`, exclusive in `strict`.
  [[nodiscard]] guard shared() const noexcept {
    switch (mode_) {
      case thread_sync::none:
        return {};
      case thread_sync::strict:
        m_.lock();
        return {&m_, true};
      case thread_sync::rw:
        m_.lock_shared();
        return {&m_, false};
    }
    return {};
  }

 private:
  thread_sync mode_;
  mutable std::shared_mutex m_;
};

}  // namespace nixl::detail
