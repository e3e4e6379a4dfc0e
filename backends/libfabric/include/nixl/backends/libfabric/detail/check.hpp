#pragma once
/// Checked calls into libfabric. Every libfabric call of the backend that returns an error
/// code goes through one of these macros, which record the call text, file and line:
///
// clang-format off
///   NIXL_FI_CHECK(fi_domain(fabric, info, &dom, nullptr));             // throws nixl::error(backend)
///   NIXL_FI_CHECK(fi_mr_reg(...), "register_region: {:#x}, {} bytes", a, n);
///   if (!NIXL_FI_WARN(fi_close(&mr->fid))) { ... }                      // destructors: log, never throw
// clang-format on

#include <string_view>

#include <fmt/format.h>
#include <rdma/fi_errno.h>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::libfabric::detail {

/// Throws `nixl::error(backend)`: "LIBFABRIC <context>: <call name>: <message> (<file>:<line>)".
[[noreturn]] inline void throw_fi(long rc, std::string_view call, const char* file, int line,
                                  std::string_view context = {}) {
  const std::string_view name = call.substr(0, call.find('('));
  const int e = static_cast<int>(rc < 0 ? -rc : rc);
  if (context.empty())
    raise(status::backend, "LIBFABRIC: {}: {} ({}:{})", name, fi_strerror(e), file, line);
  raise(status::backend, "LIBFABRIC {}: {}: {} ({}:{})", context, name, fi_strerror(e), file, line);
}

/// Logs a failed call; true when it succeeded.
inline bool warn_fi(long rc, std::string_view call, const char* file, int line) noexcept {
  if (rc >= 0) return true;
  log::warn("LIBFABRIC: {}: {} ({}:{})", call.substr(0, call.find('(')),
            fi_strerror(static_cast<int>(-rc)), file, line);
  return false;
}

}  // namespace nixl::libfabric::detail

/// Evaluates a libfabric call returning 0 or a negative error; throws `nixl::error(backend)`
/// naming the call, libfabric's message, file and line, and (optional fmt arguments) what was
/// being done.
#define NIXL_FI_CHECK(call, ...)                                                              \
  do {                                                                                        \
    const long nixl_fi_rc_ = static_cast<long>(call);                                         \
    if (nixl_fi_rc_ < 0)                                                                      \
      ::nixl::libfabric::detail::throw_fi(nixl_fi_rc_, #call, __FILE__,                       \
                                          __LINE__ __VA_OPT__(, ::fmt::format(__VA_ARGS__))); \
  } while (false)

/// Evaluates a libfabric call; logs a failure and yields false, never throws.
#define NIXL_FI_WARN(call) \
  ::nixl::libfabric::detail::warn_fi(static_cast<long>(call), #call, __FILE__, __LINE__)
