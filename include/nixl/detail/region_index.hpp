#pragma once
/// Sorted index of registered regions with covering lookup by binary search.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nixl/detail/memory.hpp>
#include <nixl/detail/region_pin.hpp>

namespace nixl::detail {

// region_pin (region_pin.hpp): a region whose token has other owners than its index is in use.

/// Regions of one (kind, backend) pair, sorted by (dev, addr, len). Region objects live at
/// stable addresses so that resolved descriptors may point at them.
template <class Region>
class region_index {
 public:
  struct entry {
    desc range;        ///< length already normalised (unbounded = SIZE_MAX)
    std::string meta;  ///< registration metadata string
    std::string pub;   ///< public data (what peers get for a local region, what a peer sent for a
                       ///< remote one)
    std::unique_ptr<Region> region;
    region_pin pin = std::make_shared<pin_node>();  ///< copied by the lists and requests using it

    /// True while a prepared list or a request points into this region.
    bool in_use() const noexcept { return pin.use_count() > 1; }
  };

  explicit region_index(mem_kind kind = mem_kind::dram) : kind_(kind) {}

  mem_kind kind() const noexcept { return kind_; }
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  auto begin() const noexcept { return entries_.begin(); }
  auto end() const noexcept { return entries_.end(); }

  /// The stored form of `d`: a length of 0 means unbounded for file, block and object kinds.
  desc normalise(desc d) const noexcept {
    if (d.len == 0 && unbounded_allowed(kind_)) d.len = std::numeric_limits<std::size_t>::max();
    return d;
  }

  /// Inserts a region. The caller has checked that no equal range is present.
  Region& insert(const desc& d, std::string meta, std::string pub, Region r) {
    desc n = normalise(d);
    auto it = std::upper_bound(entries_.begin(), entries_.end(), n,
                               [](const desc& a, const entry& e) { return a < e.range; });
    auto pos = entries_.insert(
        it, entry{n, std::move(meta), std::move(pub), std::make_unique<Region>(std::move(r))});
    rebuild_reach();
    return *pos->region;
  }

  /// Exact match of a range (after normalisation), or null.
  const entry* find_exact(const desc& d) const noexcept {
    desc n = normalise(d);
    auto it = std::lower_bound(entries_.begin(), entries_.end(), n,
                               [](const entry& e, const desc& a) { return e.range < a; });
    return it != entries_.end() && it->range == n ? &*it : nullptr;
  }

  /// Removes the region equal to `d` and hands it back with its token, or returns null.
  std::unique_ptr<Region> erase(const desc& d, region_pin& pin) {
    desc n = normalise(d);
    auto it = std::lower_bound(entries_.begin(), entries_.end(), n,
                               [](const entry& e, const desc& a) { return e.range < a; });
    if (it == entries_.end() || !(it->range == n)) return nullptr;
    pin = std::move(it->pin);
    auto r = std::move(it->region);
    entries_.erase(it);
    rebuild_reach();
    return r;
  }

  /// Removes the region equal to `d` and hands it back, or returns null.
  std::unique_ptr<Region> erase(const desc& d) {
    desc n = normalise(d);
    auto it = std::lower_bound(entries_.begin(), entries_.end(), n,
                               [](const entry& e, const desc& a) { return e.range < a; });
    if (it == entries_.end() || !(it->range == n)) return nullptr;
    auto r = std::move(it->region);
    entries_.erase(it);
    rebuild_reach();
    return r;
  }

  /// The region that covers all of `q`, or null. O(log n) plus the number of overlapping
  /// regions that start before `q` and reach its end.
  const entry* find_covering(const desc& q) const noexcept {
    if (entries_.empty()) return nullptr;
    // Last entry whose (dev, addr) <= (q.dev, q.addr).
    desc key{q.addr, std::numeric_limits<std::size_t>::max(), q.dev};
    auto it = std::upper_bound(entries_.begin(), entries_.end(), key,
                               [](const desc& a, const entry& e) { return a < e.range; });
    std::size_t i = static_cast<std::size_t>(it - entries_.begin());
    const auto qend = q.end();
    while (i > 0) {
      --i;
      const entry& e = entries_[i];
      if (e.range.dev != q.dev) break;
      if (e.range.covers(q)) return &e;
      if (reach_[i] < qend) break;  // no earlier region on this device reaches that far
    }
    return nullptr;
  }

  /// Takes every region out (for teardown).
  std::vector<entry> take_all() noexcept {
    reach_.clear();
    return std::exchange(entries_, {});
  }

 private:
  void rebuild_reach() {
    reach_.resize(entries_.size());
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const auto e = entries_[i].range.end();
      reach_[i] = i > 0 && entries_[i - 1].range.dev == entries_[i].range.dev
                      ? std::max(reach_[i - 1], e)
                      : e;
    }
  }

  mem_kind kind_;
  std::vector<entry> entries_;
  std::vector<std::uintptr_t> reach_;  ///< running max of end() within a device
};

}  // namespace nixl::detail
