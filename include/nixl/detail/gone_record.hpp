#pragma once
/// `gone_record`: the agents a transport found gone (docs/error-model.md, "Agents found gone"),
/// each until its name comes back, and a count of the findings that a wait compares.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
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

}  // namespace nixl::detail
