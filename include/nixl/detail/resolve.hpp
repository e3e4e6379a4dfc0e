#pragma once
/// Resolving descriptor lists against region indexes: which backends a call selects, binding
/// every descriptor to the region that covers it, pairing checks and the merge of contiguous
/// neighbours. Free functions used by the agent.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nixl/detail/concepts.hpp>
#include <nixl/detail/memory.hpp>
#include <nixl/detail/recycled.hpp>
#include <nixl/detail/region_index.hpp>
#include <nixl/detail/status.hpp>

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

/// A vector for one call's temporaries (bound descriptors, pins) of trivially copyable `T`: the
/// first `N` elements inside it, on the caller's stack, more on the heap. So a short list costs
/// no allocation. Neither copyable nor movable (it may point into itself).
template <class T, std::size_t N>
class scratch_vector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

 public:
  scratch_vector() noexcept {}  // NOLINT(modernize-use-equals-default): no zeroing of local_
  scratch_vector(const scratch_vector&) = delete;
  scratch_vector& operator=(const scratch_vector&) = delete;
  ~scratch_vector() {
    if (data_ != local_) recycling_allocator<T>{}.deallocate(data_, capacity_);
  }

  std::size_t size() const noexcept { return size_; }
  T* data() noexcept { return data_; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T& back() noexcept { return data_[size_ - 1]; }
  std::span<T> span() noexcept { return {data_, size_}; }

  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    // Raw storage: every element is written before it is read. Large blocks come from the
    // block cache (recycled.hpp): a call of many descriptors does not fault its pages in again.
    T* p = recycling_allocator<T>{}.allocate(n);
    std::copy_n(data_, size_, p);
    if (data_ != local_) recycling_allocator<T>{}.deallocate(data_, capacity_);
    data_ = p;
    capacity_ = n;
  }
  /// Sets the size; new elements are left for the caller to write before reading them.
  void resize_for_overwrite(std::size_t n) {
    reserve(n);
    size_ = n;
  }
  void push_back(const T& v) {
    if (size_ == capacity_) reserve(2 * capacity_);
    data_[size_++] = v;
  }
  T* erase(T* first, T* last) noexcept {
    std::copy(last, end(), first);
    size_ -= static_cast<std::size_t>(last - first);
    return first;
  }

 private:
  union {
    T local_[N];
  };
  T* data_ = local_;
  std::size_t size_ = 0;
  std::size_t capacity_ = N;
};

/// A call's bound descriptors and the pins it collects.
template <class Region>
using scratch_descs = scratch_vector<bound_desc<Region>, 8>;
using scratch_pins = scratch_vector<const region_pin*, 8>;

/// Binds every descriptor of `list` to the region of `idx` that covers it, into `out` (resized
/// to the list), and adds the address of each region's pin to `pins` (consecutive repeats
/// once). On a miss returns false, lowers `worst` to the first miss and leaves `pins` as it was.
/// `pins` is a `scratch_vector` of pin addresses.
template <class Region, class Out, class Pins>
bool bind_into(const region_index<Region>& idx, const xfer_dlist& list, std::size_t& worst,
               Pins& pins, Out& out) {
  if (list.empty() || idx.empty()) {
    worst = 0;
    return false;
  }
  if constexpr (requires { out.resize_for_overwrite(list.size()); })
    out.resize_for_overwrite(list.size());  // every element is written below
  else
    out.resize(list.size());
  const std::size_t first_pin = pins.size();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto* e = idx.find_covering(list[i]);
    if (e == nullptr) {
      worst = std::min(worst, i);
      pins.resize_for_overwrite(first_pin);
      return false;
    }
    static_cast<desc&>(out[i]) = list[i];
    out[i].region = e->region.get();
    if (pins.size() == first_pin || pins.back() != &e->pin) pins.push_back(&e->pin);
  }
  return true;
}

/// `bind_into` a vector of its own, or nothing on a miss.
template <class Region, class Pins>
std::optional<std::vector<bound_desc<Region>>> bind_all(const region_index<Region>& idx,
                                                        const xfer_dlist& list, std::size_t& worst,
                                                        Pins& pins) {
  std::vector<bound_desc<Region>> out;
  if (!bind_into(idx, list, worst, pins, out)) return std::nullopt;
  return out;
}

/// Sorts and deduplicates collected pin addresses (a list usually points into few regions).
template <class Pins>
void compact_pins(Pins& p) {
  std::sort(p.begin(), p.end(), std::less<>{});
  p.erase(std::unique(p.begin(), p.end()), p.end());
}

/// The pins of a prepared list, deduplicated, behind one token.
template <class Pins>
region_pin pinned(Pins& refs) {
  compact_pins(refs);
  region_pins all;
  all.reserve(refs.size());
  for (const region_pin* r : refs) all.push_back(*r);
  return std::make_shared<const pin_node>(std::move(all));
}

/// The pins a request keeps: one or two inline (a request usually points into one local and one
/// remote region), more behind one shared pointer.
template <class Pins>
std::pair<region_pin, region_pin> request_pins(Pins& refs) {
  switch (refs.size()) {
    case 0:
      return {};
    case 1:
      return {*refs[0], {}};
    case 2:
      return {*refs[0], refs[1] == refs[0] ? region_pin{} : *refs[1]};
    default:
      return {pinned(refs), {}};
  }
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

/// Merges neighbours contiguous on both sides (same regions and devices) in place; returns how
/// many pairs are left at the front of `l` and `r`.
template <class L, class R>
std::size_t merge_contiguous(std::span<L> l, std::span<R> r) noexcept {
  if (l.size() <= 1) return l.size();
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
  return w + 1;
}

}  // namespace nixl::detail
