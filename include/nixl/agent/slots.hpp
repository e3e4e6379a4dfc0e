#pragma once
/// What an agent stores per backend: its own registrations (`backend_slot`) and, per peer, the
/// peer object and the peer's regions (`peer_slot`, gathered in `peer_state`).

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/slots.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nixl/detail/region_index.hpp>
#include <nixl/detail/type_list.hpp>

namespace nixl::detail {

/// One region index per memory kind.
template <class R>
using index_array = std::array<region_index<R>, mem_kind_count>;

template <class R>
index_array<R> make_indices() {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return index_array<R>{region_index<R>(static_cast<mem_kind>(I))...};
  }
  (std::make_index_sequence<mem_kind_count>{});
}

/// A region deregistered while a prepared list or a request pointed into it: the backend keeps
/// it (and its loopback view) until the tokens have no holder left.
template <class B>
struct retired_region {
  std::weak_ptr<const pin_node> pin, view_pin;
  std::unique_ptr<typename B::region> region;
  std::unique_ptr<typename B::remote_region> view;
};

/// A created backend, the parameters it was made with and the agent's registrations on it.
template <class B>
struct backend_slot {
  std::unique_ptr<B> engine;
  params user_params;
  std::string conn_info;
  index_array<typename B::region> regions = make_indices<typename B::region>();
  std::vector<retired_region<B>> retired;
};

/// A peer as one backend knows it: the peer object and the peer's regions.
template <class B>
struct peer_slot {
  B* engine = nullptr;
  std::optional<typename B::peer> peer;
  std::string conn_info;
  index_array<typename B::remote_region> regions = make_indices<typename B::remote_region>();
};

/// Everything loaded about one peer. Shared with the requests and prepared lists built
/// against it, so it outlives an invalidation until they are gone.
template <class... Backends>
struct peer_state {
  peer_token token;
  std::tuple<peer_slot<Backends>...> slots;

  peer_state() = default;
  peer_state(const peer_state&) = delete;
  ~peer_state() { unload_all(); }
  /// Unloads it from every backend now (its agent is being destroyed); later, nothing.
  void unload_all() noexcept {
    for_each_type<Backends...>([&]<class B>() {
      auto& s = std::get<peer_slot<B>>(slots);
      unload(s);
      s.engine = nullptr;
    });
  }
  template <class B>
  static void unload(peer_slot<B>& s) noexcept {
    if (s.engine == nullptr) return;
    for (auto& idx : s.regions)
      for (auto& e : idx.take_all()) s.engine->unload_region(*e.region);
    if constexpr (remote_backend<B>) {
      if (s.peer) s.engine->unload_peer(*s.peer);
    }
    s.peer.reset();
  }
};

}  // namespace nixl::detail
