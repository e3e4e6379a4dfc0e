#pragma once
/// Status codes of the hot path and the exception type of the setup path.

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>

namespace nixl {

/// Result of hot-path calls. Values are NIXL's `nixl_status_t` codes.
enum class status : std::int32_t {
  in_progress = 1,
  success = 0,
  not_posted = -1,
  invalid_param = -2,
  backend = -3,
  not_found = -4,
  mismatch = -5,
  not_allowed = -6,
  repost_active = -7,
  unknown = -8,
  not_supported = -9,
  remote_disconnect = -10,
  canceled = -11,
  no_telemetry = -12,
};

/// NIXL's name of a status (`"NIXL_SUCCESS"`, `"NIXL_ERR_NOT_FOUND"`, ...).
constexpr std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::in_progress:
      return "NIXL_IN_PROG";
    case status::success:
      return "NIXL_SUCCESS";
    case status::not_posted:
      return "NIXL_ERR_NOT_POSTED";
    case status::invalid_param:
      return "NIXL_ERR_INVALID_PARAM";
    case status::backend:
      return "NIXL_ERR_BACKEND";
    case status::not_found:
      return "NIXL_ERR_NOT_FOUND";
    case status::mismatch:
      return "NIXL_ERR_MISMATCH";
    case status::not_allowed:
      return "NIXL_ERR_NOT_ALLOWED";
    case status::repost_active:
      return "NIXL_ERR_REPOST_ACTIVE";
    case status::unknown:
      return "NIXL_ERR_UNKNOWN";
    case status::not_supported:
      return "NIXL_ERR_NOT_SUPPORTED";
    case status::remote_disconnect:
      return "NIXL_ERR_REMOTE_DISCONNECT";
    case status::canceled:
      return "NIXL_ERR_CANCELED";
    case status::no_telemetry:
      return "NIXL_ERR_NO_TELEMETRY";
  }
  return "NIXL_ERR_UNKNOWN";
}

/// True for `success` and `in_progress`, the two states that are not errors.
constexpr bool ok(status s) noexcept {
  return s == status::success || s == status::in_progress;
}

/// The error category whose values are NIXL's status codes.
inline const std::error_category& error_category() noexcept {
  struct category final : std::error_category {
    const char* name() const noexcept override { return "nixl"; }
    std::string message(int v) const override {
      return std::string(to_string(static_cast<status>(v)));
    }
  };
  static const category c;
  return c;
}

inline std::error_code make_error_code(status s) noexcept {
  return {static_cast<int>(s), error_category()};
}

/// Setup-path error: a `std::system_error` in the NIXL category. The message names the call,
/// the bad value and the fix.
class error : public std::system_error {
 public:
  error(status s, const std::string& what) : std::system_error(make_error_code(s), what) {}
  /// The NIXL status this error carries.
  status status_code() const noexcept { return static_cast<status>(code().value()); }
};

namespace detail {
[[noreturn]] inline void fail(status s, std::string msg) {
  throw error(s, msg);
}
}  // namespace detail

/// Throws `nixl::error(s, formatted message)`.
template <class... Args>
[[noreturn]] void raise(status s, fmt::format_string<Args...> f, Args&&... args) {
  detail::fail(s, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace nixl

template <>
struct std::is_error_code_enum<nixl::status> : std::true_type {};

template <>
struct fmt::formatter<nixl::status> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(nixl::status s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(nixl::to_string(s), ctx);
  }
};
