#pragma once
/// Short compile-time checks of a backend's contract: the role it plays and the kind pairs it
/// moves or refuses, each pair written `route<Local, Remote>`.

#include <nixl/detail/concepts.hpp>

namespace nixl {

/// A pair of kinds, local -> remote, for backend_for_all / backend_for_none.
template <class Local, class Remote>
struct route {};

namespace detail {
template <class B, class Route>
inline constexpr bool moves_route = false;
template <class B, class Local, class Remote>
inline constexpr bool moves_route<B, route<Local, Remote>> = backend_for<B, Local, Remote>;
}  // namespace detail

/// `B` moves every listed route.
template <class B, class... Routes>
concept backend_for_all = backend<B> &&(detail::moves_route<B, Routes>&&...);

/// `B` moves none of the listed routes.
template <class B, class... Routes>
concept backend_for_none = backend<B> &&(!detail::moves_route<B, Routes> && ...);

/// A backend of agents that reach each other: loopback and remote, with notifications and a
/// progress call.
template <class B>
concept peer_backend = backend<B> && loopback_backend<B> && remote_backend<B> &&
    notifying_backend<B> && progressing_backend<B>;

/// A backend of local storage: it answers queries and loops back, and has no peers.
template <class B>
concept storage_backend =
    backend<B> && loopback_backend<B> && querying_backend<B> && !remote_backend<B>;

}  // namespace nixl
