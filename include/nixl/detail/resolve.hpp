#pragma once
/// Resolving descriptor lists against region indexes: which backends a call selects, binding
/// every descriptor to the region that covers it, pairing checks and the merge of contiguous
/// neighbours. Free functions used by the agent.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nixl/concepts.hpp>
#include <nixl/detail/region_index.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::detail {

/// The kinds backend `B` moves, in enum order.
template <class B>
std::vector<mem_kind> kinds_of() {
  std::vector<mem_kind> out;
  for (std::size_t i = 0; i < mem_kind_count; ++i)
    if (contains(typename B::memory_kinds{}, static_cast<mem_kind>(i)))
      out.push_back(static_cast<mem_kind>(i));
  return out;
}

/// True when `names` is empty or names backend `B`.
template <class B>
bool selected(const std::vector<std::string>& names) noexcept {
  if (names.empty()) return true;
  for (const auto& n : names)
    if (n == B::name) return true;
  return false;
}

/// Index of the first descriptor no region of `idx` covers; `list.size()` when all are covered.
template <class Region>
std::size_t first_uncovered(const region_index<Region>& idx, const xfer_dlist& list) noexcept {
  for (std::size_t i = 0; i < list.size(); ++i)
    if (idx.find_covering(list[i]) == nullptr) return i;
  return list.size();
}

/// Resolves every descriptor, or returns nothing and lowers `worst` to the first miss. Adds the
/// pins of the regions used to `pins` (consecutive repeats once).
template <class Region>
std::optional<std::vector<bound_desc<Region>>> bind_all(const region_index<Region>& idx,
                                                        const xfer_dlist& list, std::size_t& worst,
                                                        region_pins& pins) {
  if (list.empty() || idx.empty()) {
    worst = 0;
    return std::nullopt;
  }
  std::vector<bound_desc<Region>> out(list.size());
  const std::size_t first_pin = pins.size();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto* e = idx.find_covering(list[i]);
    if (e == nullptr) {
      worst = std::min(worst, i);
      pins.resize(first_pin);
      return std::nullopt;
    }
    static_cast<desc&>(out[i]) = list[i];
    out[i].region = e->region.get();
    if (pins.size() == first_pin || pins.back() != e->pin) pins.push_back(e->pin);
  }
  return out;
}

/// The pins of a request or list, deduplicated, behind one shared pointer.
inline std::shared_ptr<const region_pins> pinned(region_pins&& p) {
  compact_pins(p);
  return std::make_shared<const region_pins>(std::move(p));
}

/// Checks that two lists pair one to one (same count, same lengths); throws invalid_param.
inline void check_pairs(const xfer_dlist& l, const xfer_dlist& r) {
  if (l.empty()) raise(status::invalid_param, "create_request: the descriptor lists are empty");
  if (l.size() != r.size())
    raise(status::invalid_param,
          "create_request: local list has {} descriptors, remote list {}; they pair one to one",
          l.size(), r.size());
  for (std::size_t i = 0; i < l.size(); ++i)
    if (l[i].len != r[i].len)
      raise(status::invalid_param,
            "create_request: descriptor {} has length {} locally and {} remotely", i, l[i].len,
            r[i].len);
}

/// Merges neighbours contiguous on both sides (same regions and devices), in place.
template <class L, class R>
void merge_contiguous(std::vector<L>& l, std::vector<R>& r) {
  if (l.size() <= 1) return;
  std::size_t w = 0;
  for (std::size_t i = 1; i < l.size(); ++i) {
    auto& a = l[w];
    auto& b = r[w];
    if (a.region == l[i].region && b.region == r[i].region && a.dev == l[i].dev &&
        b.dev == r[i].dev && a.addr + a.len == l[i].addr && b.addr + b.len == r[i].addr) {
      a.len += l[i].len;
      b.len += r[i].len;
    } else {
      ++w;
      l[w] = l[i];
      r[w] = r[i];
    }
  }
  l.resize(w + 1);
  r.resize(w + 1);
}

}  // namespace nixl::detail
