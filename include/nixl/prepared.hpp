#pragma once
/// `nixl::prepared<Backends...>`: a descriptor list resolved once, for requests made later from
/// index vectors; `typed_prepared<Kind, Backends...>` carries its kind in the type. An agent
/// calls them `agent<Backends...>::prepared` and `agent<Backends...>::typed_prepared<Kind>`.

#include <cstddef>
#include <memory>
#include <optional>
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
}  // namespace detail

/// A descriptor list resolved once against the local registrations ("" agent) or a peer's
/// regions, for requests made later from index vectors.
template <class... Backends>
class prepared {
 public:
  prepared() = default;
  mem_kind kind() const noexcept { return kind_; }
  std::size_t size() const noexcept { return count_; }
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
  std::tuple<local_vec<Backends>...> local_descs_;
  std::tuple<remote_vec<Backends>...> remote_descs_;
};

/// A prepared list whose kind is a compile-time tag.
template <kind_tag Kind, class... Backends>
class typed_prepared : public prepared<Backends...> {
 public:
  typed_prepared() = default;
  explicit typed_prepared(prepared<Backends...>&& p) : prepared<Backends...>(std::move(p)) {}
};

}  // namespace nixl
