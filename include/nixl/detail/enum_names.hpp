#pragma once
/// One name table per enum: the name of a value, with no switch.

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

namespace nixl::detail {

/// Names of the enumerators of `E` whose values run without gaps from `first` upward:
/// `names[i]` names the value `first + i`; any other value gets `fallback`.
template <class E, std::size_t N>
requires std::is_enum_v<E>
struct enum_names {
  using underlying = std::underlying_type_t<E>;

  std::array<std::string_view, N> names;
  std::string_view fallback;
  underlying first = 0;

  /// Name of `e`, or `fallback` for a value outside the table.
  constexpr std::string_view operator()(E e) const noexcept {
    const auto i =
        static_cast<long long>(static_cast<underlying>(e)) - static_cast<long long>(first);
    return i >= 0 && i < static_cast<long long>(N) ? names[static_cast<std::size_t>(i)] : fallback;
  }

  /// The enumerator at position `i` of the table.
  constexpr E at(std::size_t i) const noexcept {
    return static_cast<E>(static_cast<underlying>(first + static_cast<underlying>(i)));
  }

  static constexpr std::size_t size() noexcept { return N; }
};

/// `make_enum_names<E>({"a", "b"}, "?")`: names of the values 0, 1, ... of `E`;
/// `first` moves the start (a negative first value, for example).
template <class E, std::size_t N>
constexpr enum_names<E, N> make_enum_names(const std::string_view (&names)[N],
                                           std::string_view fallback,
                                           std::underlying_type_t<E> first = 0) noexcept {
  enum_names<E, N> t{{}, fallback, first};
  for (std::size_t i = 0; i < N; ++i) t.names[i] = names[i];
  return t;
}

}  // namespace nixl::detail
