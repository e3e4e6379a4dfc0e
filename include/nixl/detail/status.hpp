#pragma once
/// Status codes of the hot path and the exception type of the setup path.

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>

#include <nixl/detail/enum_names.hpp>

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
  xfer_stalled = -13,  ///< no completion within the request's stall timeout; canceled
};

/// The most negative status: error values run without gaps from -1 down to it.
inline constexpr status last_error = status::xfer_stalled;

/// NIXL's names of the statuses, from `xfer_stalled` (-13) up to `in_progress` (1).
inline constexpr auto status_names = detail::make_enum_names<status>(
    {"NIXL_ERR_XFER_STALLED", "NIXL_ERR_NO_TELEMETRY", "NIXL_ERR_CANCELED",
     "NIXL_ERR_REMOTE_DISCONNECT", "NIXL_ERR_NOT_SUPPORTED", "NIXL_ERR_UNKNOWN",
     "NIXL_ERR_REPOST_ACTIVE", "NIXL_ERR_NOT_ALLOWED", "NIXL_ERR_MISMATCH", "NIXL_ERR_NOT_FOUND",
     "NIXL_ERR_BACKEND", "NIXL_ERR_INVALID_PARAM", "NIXL_ERR_NOT_POSTED", "NIXL_SUCCESS",
     "NIXL_IN_PROG"},
    "NIXL_ERR_UNKNOWN", static_cast<std::int32_t>(last_error));

/// NIXL's name of a status (`"NIXL_SUCCESS"`, `"NIXL_ERR_NOT_FOUND"`, ...).
constexpr std::string_view to_string(status s) noexcept {
  return status_names(s);
}

static_assert(to_string(status::success) == "NIXL_SUCCESS" &&
              to_string(status::in_progress) == "NIXL_IN_PROG" &&
              to_string(status::no_telemetry) == "NIXL_ERR_NO_TELEMETRY" &&
              to_string(status::xfer_stalled) == "NIXL_ERR_XFER_STALLED");

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
