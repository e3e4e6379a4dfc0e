#pragma once
/// `nixl::prepared<Backends...>`: a descriptor list resolved once, for requests made later from
/// index vectors; `typed_prepared<Kind, Backends...>` carries its kind in the type. An agent
/// calls them `agent<Backends...>::prepared` and `agent<Backends...>::typed_prepared<Kind>`.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nixl/concepts.hpp>
#include <nixl/detail/region_pin.hpp>
#include <nixl/detail/type_list.hpp>
#include <nixl/memory.hpp>

namespace nixl {

template <class... Backends>
class agent;
namespace detail {
template <class... Backends>
struct peer_state;  // agent/slots.hpp

/// A run of a prepared strided list: its first flat index and the distance between its blocks.
struct run {
  std::size_t start = 0;
  std::size_t stride = 0;
};

/// Maps the flat indices of a prepared list to its stored descriptors: element f itself for a
/// list prepared one descriptor per element (no runs), block f - S_r of run r (the one with
/// S_r <= f < S_r+1) for a strided one. Remembers the last run, so that ascending indices cost
/// no search.
class run_cursor {
 public:
  run_cursor(std::span<const run> runs, std::size_t total) noexcept : runs_(runs), total_(total) {}
  template <class D>
  D at(const std::vector<D>& stored, std::size_t f) noexcept {
    if (runs_.empty()) return stored[f];
    if (f < runs_[r_].start || f >= end_of(r_)) {
      auto it = std::upper_bound(runs_.begin(), runs_.end(), f,
                                 [](std::size_t x, const run& r) { return x < r.start; });
      r_ = static_cast<std::size_t>(it - runs_.begin()) - 1;  // runs_[0].start == 0 <= f
    }
    D d = stored[r_];
    d.addr += (f - runs_[r_].start) * runs_[r_].stride;
    return d;
  }

 private:
  std::size_t end_of(std::size_t r) const noexcept {
    return r + 1 < runs_.size() ? runs_[r + 1].start : total_;
  }
  std::span<const run> runs_;
  std::size_t total_ = 0;
  std::size_t r_ = 0;
};
}  // namespace detail

/// A descriptor list resolved once against the local registrations ("" agent) or a peer's
/// regions, for requests made later from index vectors.
template <class... Backends>
class prepared {
 public:
  prepared() = default;
  mem_kind kind() const noexcept { return kind_; }
  /// Number of elements (flat indices 0..size()-1); for a strided list, its blocks.
  std::size_t size() const noexcept { return count_; }
  /// True when prepared from a strided list (it keeps the runs, not the blocks).
  bool strided() const noexcept { return !runs_.empty(); }
  /// Descriptors stored per backend: one per run for a strided list (whatever its block
  /// count), one per element otherwise.
  std::size_t stored_count() const noexcept { return strided() ? runs_.size() : count_; }
  bool is_local() const noexcept { return local_; }
  /// The peer ("" for the local side).
  const std::string& agent_name() const noexcept { return agent_; }
  /// Names of the backends that resolved every descriptor.
  std::vector<std::string_view> backends() const {
    std::vector<std::string_view> out;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (has<B>()) out.push_back(B::name);
    });
    return out;
  }
  template <class B>
  bool has() const noexcept {
    return local_ ? std::get<local_vec<B>>(local_descs_).has_value()
                  : std::get<remote_vec<B>>(remote_descs_).has_value();
  }

 private:
  template <class... Bs>
  friend class agent;
  template <class B>
  using local_vec = std::optional<std::vector<bound_desc<typename B::region>>>;
  template <class B>
  using remote_vec = std::optional<std::vector<bound_desc<typename B::remote_region>>>;

  std::string agent_;
  bool local_ = true;
  mem_kind kind_ = mem_kind::dram;
  std::size_t count_ = 0;
  std::shared_ptr<detail::peer_state<Backends...>> peer_;
  /// The regions the list points into stay registered with the backend while it (or a request
  /// made from it) lives, even when deregister_memory removed them; make_request then refuses
  /// the list.
  detail::region_pin pins_;
  /// Per backend, one bound descriptor per element, or per run of a strided list (its first
  /// block, bound to the region that covers the whole run).
  std::tuple<local_vec<Backends>...> local_descs_;
  std::tuple<remote_vec<Backends>...> remote_descs_;
  /// A strided list's runs (cumulative start indices); empty for one prepared per element.
  std::vector<detail::run> runs_;

  detail::run_cursor cursor() const noexcept { return {runs_, count_}; }
};

/// A prepared list whose kind is a compile-time tag.
template <kind_tag Kind, class... Backends>
class typed_prepared : public prepared<Backends...> {
 public:
  typed_prepared() = default;
  explicit typed_prepared(prepared<Backends...>&& p) : prepared<Backends...>(std::move(p)) {}
};

}  // namespace nixl
