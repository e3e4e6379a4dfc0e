#pragma once
/// What prepared lists and requests hold of the regions they point into: one token per region,
/// and one per set of regions (a list that points into several).

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace nixl::detail {

struct pin_node;
using region_pin = std::shared_ptr<const pin_node>;
using region_pins = std::vector<region_pin>;

/// Counts regions deregistered while a list or a request still pointed into them, for the
/// whole process: a request checks its tokens again only when it changed.
inline std::atomic<std::uint64_t>& retire_epoch() noexcept {
  static std::atomic<std::uint64_t> e{0};
  return e;
}

/// A region's token: `retired` once the region was deregistered while in use (the backend
/// keeps the registration until the last holder lets go). A set's token: its regions'.
struct pin_node {
  mutable std::atomic<bool> retired{false};
  region_pins members;

  pin_node() = default;
  explicit pin_node(region_pins m) : members(std::move(m)) {}

  /// True when this region, or one of the set, was deregistered.
  bool stale() const noexcept {
    if (retired.load(std::memory_order_acquire)) return true;
    for (const auto& m : members)
      if (m && m->stale()) return true;
    return false;
  }
};

}  // namespace nixl::detail
