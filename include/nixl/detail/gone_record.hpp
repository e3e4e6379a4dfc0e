#pragma once
/// `gone_record`: the agents a transport found gone (docs/error-model.md, "Agents found gone"),
/// each until its name comes back, and a count of the findings that a wait compares.
/// `silence_watch`: how a transport finds gone an agent that only sends to it, by the silence of
/// its regular messages (UCX's beats, LIBFABRIC's pings).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nixl::detail {

class gone_record {
 public:
  /// Records that agent `name` is gone (`gone`) or back. True when it was a new finding of a
  /// gone agent: the caller then wakes the agent's waits. Never throws (out of memory: not
  /// recorded).
  bool note(std::string_view name, bool gone) noexcept {
    try {
      std::lock_guard lk(mu_);
      const auto it = names_.find(name);
      if (!gone) {
        if (it != names_.end()) names_.erase(it);
        return false;
      }
      if (it == names_.end()) names_.emplace(name);
    } catch (...) {
      return false;
    }
    events_.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  /// Appends the names of the agents gone now, in order.
  void append(std::vector<std::string>& out) const {
    std::lock_guard lk(mu_);
    out.insert(out.end(), names_.begin(), names_.end());
  }
  /// How many findings there were so far (a wait ends when it moves).
  std::uint64_t events() const noexcept { return events_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> names_;
  std::atomic<std::uint64_t> events_{0};
};

/// One sender that says how often it sends (its period): when it was last heard, and whether
/// its silence found it gone. Times are steady-clock nanoseconds. Not synchronised: the lock of
/// the table that holds it guards it.
struct silence_watch {
  /// At most this many senders are watched per backend; later ones are not (nor logged twice).
  static constexpr std::size_t max_senders = 4096;

  std::int64_t last_ns = 0;   ///< when it was last heard
  std::int64_t limit_ns = 0;  ///< silence after which it is gone; 0: not watched
  bool gone = false;

  /// The limit for a sender of period `period_ms`: four of its periods, and at least `floor`.
  static std::int64_t limit(std::chrono::nanoseconds floor, std::uint32_t period_ms) noexcept {
    return std::max<std::int64_t>(floor.count(), std::int64_t{4'000'000} * period_ms);
  }
  bool watched() const noexcept { return limit_ns != 0; }
  /// Not watched any more (it said bye, or its messages are not regular).
  void stop() noexcept { limit_ns = 0; }
  /// Heard at `now`, with limit `limit_ns`: true when it had been found gone (it is back).
  bool heard(std::int64_t now, std::int64_t limit) noexcept {
    last_ns = now;
    limit_ns = limit;
    return std::exchange(gone, false);
  }
  /// `gap` ns in which the watcher did not run (its thread or process stopped): that time
  /// counts against no sender.
  void discount(std::int64_t gap, std::int64_t now) noexcept {
    last_ns = std::min(last_ns + gap, now);
  }
  /// Watched, not found gone yet, and silent past its limit at `now`.
  bool silent(std::int64_t now) const noexcept {
    return watched() && !gone && now - last_ns > limit_ns;
  }
};

}  // namespace nixl::detail
