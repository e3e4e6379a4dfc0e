#pragma once
/// Checked calls into libcurl: the one checked-call macro pair of the object store backends,
/// recording the call text, file and line.
///
// clang-format off
///   NIXL_CURLM_CHECK(curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, 8L));  // throws nixl::error(backend, "curl_multi_setopt(...): <curl message>")
///   NIXL_CURLM_WARN(curl_multi_cleanup(m));                          // destructors: logs, never throws
// clang-format on

#include <nixl/status.hpp>

namespace nixl::obj::detail {

/// Throws `nixl::error(backend)`: "<call>: <curl multi message> (<code>) [<file>:<line>]".
[[noreturn]] void throw_curlm(int code, const char* call, const char* file, int line);
/// Logs a failed call at error level (no-throw form).
void report_curlm(int code, const char* call, const char* file, int line) noexcept;

}  // namespace nixl::obj::detail

/// Evaluates a curl multi call (CURLMcode); throws `nixl::error(backend)` when it fails.
#define NIXL_CURLM_CHECK(expr)                                                     \
  do {                                                                             \
    const int nixl_curlm_rc_ = static_cast<int>(expr);                             \
    if (nixl_curlm_rc_ != 0)                                                       \
      ::nixl::obj::detail::throw_curlm(nixl_curlm_rc_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Evaluates a curl multi call; logs a failure and yields false, never throws.
#define NIXL_CURLM_WARN(expr)                                                     \
  ([&]() noexcept {                                                               \
    const int nixl_curlm_rc_ = static_cast<int>(expr);                            \
    if (nixl_curlm_rc_ == 0) return true;                                         \
    ::nixl::obj::detail::report_curlm(nixl_curlm_rc_, #expr, __FILE__, __LINE__); \
    return false;                                                                 \
  }())
