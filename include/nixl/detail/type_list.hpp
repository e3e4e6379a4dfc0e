#pragma once
/// Type-list helpers and the one place that selects a backend for a pair of kinds.

#include <cstddef>
#include <string_view>
#include <type_traits>

#include <nixl/detail/concepts.hpp>

namespace nixl::detail {

template <class... Ts>
struct type_list {};

template <class T, class... Ts>
inline constexpr std::size_t index_of = [] {
  constexpr bool same[] = {std::is_same_v<T, Ts>..., false};
  for (std::size_t i = 0; i < sizeof...(Ts); ++i)
    if (same[i]) return i;
  return sizeof...(Ts);
}();

/// Calls `f.template operator()<T>()` for each type, in order.
template <class... Ts, class F>
constexpr void for_each_type(F&& f) {
  (f.template operator()<Ts>(), ...);
}

/// True when no two backends share a name.
template <class... Bs>
constexpr bool unique_names() {
  constexpr std::string_view names[] = {std::string_view(Bs::name)..., std::string_view{}};
  for (std::size_t i = 0; i < sizeof...(Bs); ++i)
    for (std::size_t j = i + 1; j < sizeof...(Bs); ++j)
      if (names[i] == names[j]) return false;
  return true;
}

template <class Local, class Remote, class... Bs>
struct first_backend_for {
  using type = void;
};
template <class Local, class Remote, class B, class... Bs>
struct first_backend_for<Local, Remote, B, Bs...> {
  using type = std::conditional_t<backend_for<B, Local, Remote>, B,
                                  typename first_backend_for<Local, Remote, Bs...>::type>;
};

/// Fails compilation with one message naming both kinds when `Found` is false.
template <class Local, class Remote, bool Found, class Agent>
struct require_backend {};

#define NIXL_DETAIL_NO_BACKEND(L, R, HINT)                                                       \
  template <class Agent>                                                                         \
  struct require_backend<L##_t, R##_t, false, Agent> {                                           \
    static_assert(sizeof(Agent) == 0, "no backend in this agent moves " #L " -> " #R "; " HINT); \
  };
#define NIXL_DETAIL_NO_BACKEND_ROW(L, HINT) \
  NIXL_DETAIL_NO_BACKEND(L, dram, HINT)     \
  NIXL_DETAIL_NO_BACKEND(L, vram, HINT)     \
  NIXL_DETAIL_NO_BACKEND(L, block, HINT)    \
  NIXL_DETAIL_NO_BACKEND(L, object, HINT)   \
  NIXL_DETAIL_NO_BACKEND(L, file, HINT)
NIXL_DETAIL_NO_BACKEND_ROW(dram,
                           "add a backend that moves both kinds (nixl::ucx::backend for dram, "
                           "nixl::posix::backend for file, nixl::cuda::backend for vram)")
NIXL_DETAIL_NO_BACKEND_ROW(vram, "add nixl::cuda::backend or stage through dram")
NIXL_DETAIL_NO_BACKEND_ROW(block, "add a backend that moves block memory or stage through dram")
NIXL_DETAIL_NO_BACKEND_ROW(object, "add a backend that moves object memory or stage through dram")
NIXL_DETAIL_NO_BACKEND_ROW(file, "add nixl::posix::backend or stage through dram")
#undef NIXL_DETAIL_NO_BACKEND_ROW
#undef NIXL_DETAIL_NO_BACKEND

/// The first backend of `Bs...` that moves `Local` -> `Remote`; compilation stops with one
/// readable message when there is none.
template <class Local, class Remote, class... Bs>
struct select_backend {
  using found = typename first_backend_for<Local, Remote, Bs...>::type;
  static_assert(sizeof(require_backend<Local, Remote, !std::is_void_v<found>, type_list<Bs...>>) >
                0);
  using type = found;
};

template <class Local, class Remote, class... Bs>
using select_backend_t = typename select_backend<Local, Remote, Bs...>::type;

}  // namespace nixl::detail
