#pragma once
/// Checked calls into UCX. Every UCX call of the backend that returns a `ucs_status_t` goes
/// through one of these macros, which record the call text, file and line:
///
// clang-format off
///   NIXL_UCX_CHECK(ucp_worker_create(ctx, &wp, &w));          // throws nixl::error(backend)
///   NIXL_UCX_CHECK(ucp_mem_map(ctx, &mp, &memh), "register_region: {:#x}, {} bytes", a, n);
///   if (!NIXL_UCX_WARN(ucp_mem_unmap(ctx, memh))) { ... }     // destructors: log, never throw
// clang-format on
///
/// The optional format and arguments after the call say what the backend was doing (the
/// values a user needs to find the fault). A failure that means something more precise than
/// "UCX failed" (a parameter UCX rejects, a peer's region data it cannot unpack) is raised with
/// its own status and fix instead.

#include <string_view>

#include <fmt/format.h>
#include <ucp/api/ucp.h>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::ucx::detail {

/// Throws `nixl::error(backend)`: "UCX <context>: <call name>: <UCX message> (<file>:<line>)".
[[noreturn]] inline void throw_ucs(ucs_status_t s, std::string_view call, const char* file,
                                   int line, std::string_view context = {}) {
  const std::string_view name = call.substr(0, call.find('('));
  if (context.empty())
    raise(status::backend, "UCX: {}: {} ({}:{})", name, ucs_status_string(s), file, line);
  raise(status::backend, "UCX {}: {}: {} ({}:{})", context, name, ucs_status_string(s), file, line);
}

/// Logs a failed call; true when it succeeded. `UCS_INPROGRESS` is not a failure.
inline bool warn_ucs(ucs_status_t s, std::string_view call, const char* file, int line) noexcept {
  if (s == UCS_OK || s == UCS_INPROGRESS) return true;
  log::warn("UCX: {}: {} ({}:{})", call.substr(0, call.find('(')), ucs_status_string(s), file,
            line);
  return false;
}

}  // namespace nixl::ucx::detail

/// Evaluates a UCX call returning `ucs_status_t`; throws `nixl::error(backend)` naming the
/// call, UCX's message, file and line, and (optional fmt arguments) what was being done.
#define NIXL_UCX_CHECK(call, ...)                                                        \
  do {                                                                                   \
    const ucs_status_t nixl_ucx_s_ = (call);                                             \
    if (nixl_ucx_s_ != UCS_OK)                                                           \
      ::nixl::ucx::detail::throw_ucs(nixl_ucx_s_, #call, __FILE__,                       \
                                     __LINE__ __VA_OPT__(, ::fmt::format(__VA_ARGS__))); \
  } while (false)

/// Evaluates a UCX call returning `ucs_status_t`; logs a failure and yields false, never throws.
#define NIXL_UCX_WARN(call) ::nixl::ucx::detail::warn_ucs((call), #call, __FILE__, __LINE__)
