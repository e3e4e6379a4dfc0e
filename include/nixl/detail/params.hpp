#pragma once
/// Parsing of backend parameters (string values of `nixl::params`), the same words for every
/// backend's `config::from_params`:
/// - booleans: true, 1, yes, y, on, enable / false, 0, no, n, off, disable, in any case;
/// - numbers: unsigned decimal, or hexadecimal with a 0x prefix, within a range.
/// Both throw `nixl::error(invalid_param)` naming the backend, the key, the value and what to
/// give instead.

#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <nixl/detail/status.hpp>

namespace nixl::detail {

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// `who` names the backend ("UCX"), `key` the parameter.
inline bool parse_bool(std::string_view who, std::string_view key, std::string_view v) {
  const std::string l = lower(v);
  if (l == "true" || l == "1" || l == "yes" || l == "y" || l == "on" || l == "enable") return true;
  if (l == "false" || l == "0" || l == "no" || l == "n" || l == "off" || l == "disable")
    return false;
  raise(status::invalid_param, "{} parameter {}='{}': not a boolean; use true or false", who, key,
        v);
}

/// Who makes a request's transport calls while a backend's progress thread runs (`post_thread`,
/// UCX and LIBFABRIC): `auto` (the backend hands the thread the posts that would keep the caller
/// waiting, docs/ucx.md and docs/libfabric.md), `always`, `never` (the caller).
enum class post_thread_mode : std::uint8_t { automatic = 0, always = 1, never = 2 };

inline std::string_view to_string(post_thread_mode m) noexcept {
  switch (m) {
    case post_thread_mode::always:
      return "always";
    case post_thread_mode::never:
      return "never";
    case post_thread_mode::automatic:
      break;
  }
  return "auto";
}

/// Whether a request of `ops` operations is posted by the progress thread under mode `m`: `auto`
/// hands it over from `min_ops` operations, or when the transport would keep the caller waiting
/// (`blocks_caller`).
constexpr bool posts_on_thread(post_thread_mode m, std::size_t ops, std::size_t min_ops,
                               bool blocks_caller) noexcept {
  if (ops == 0) return false;
  switch (m) {
    case post_thread_mode::never:
      return false;
    case post_thread_mode::always:
      return true;
    case post_thread_mode::automatic:
      break;
  }
  return ops >= min_ops || blocks_caller;
}

inline post_thread_mode parse_post_thread(std::string_view who, std::string_view key,
                                          std::string_view v) {
  const std::string l = lower(v);
  if (l == "auto" || l.empty()) return post_thread_mode::automatic;
  if (l == "always") return post_thread_mode::always;
  if (l == "never") return post_thread_mode::never;
  raise(status::invalid_param, "{} parameter {}='{}': use auto (the default), always or never", who,
        key, v);
}

inline std::uint64_t parse_number(std::string_view who, std::string_view key, std::string_view v,
                                  std::uint64_t lo, std::uint64_t hi) {
  std::string_view digits = v;
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  std::uint64_t x = 0;
  const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x, base);
  if (digits.empty() || ec != std::errc{} || p != digits.data() + digits.size() || x < lo || x > hi)
    raise(status::invalid_param, "{} parameter {}='{}': use a number from {} to {}", who, key, v,
          lo, hi);
  return x;
}

}  // namespace nixl::detail
