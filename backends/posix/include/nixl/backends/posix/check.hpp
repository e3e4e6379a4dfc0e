#pragma once
/// Checked calls into libc, liburing and libaio. Every C call of the POSIX backend whose failure
/// is an error goes through one of these macros, which record the call text, file and line:
///
// clang-format off
///   int fd = NIXL_POSIX_CHECK(::open(path, flags));   // throws nixl::error(backend, "::open(path, flags): No such file ...")
///   NIXL_POSIX_CHECK_HINT(io_setup(n, &ctx), status::backend, "raise /proc/sys/fs/aio-max-nr");
///   NIXL_POSIX_WARN(::close(fd));                     // destructors: logs once, never throws
// clang-format on
///
/// A call fails when it returns a negative value. Its error is `errno` when it returned -1 with
/// `errno` set (libc), else the negated result (liburing and libaio return -errno); `errno` is
/// cleared before the call so that the two cannot be confused. CHECK yields the call's result.

#include <cerrno>
#include <string_view>

#include <nixl/status.hpp>

namespace nixl::posix::detail {

/// The error of a failed call's result `r` (< 0), given `errno` after the call.
constexpr int errno_of(long long r, int err) noexcept {
  return r == -1 && err != 0 ? err : static_cast<int>(-r);
}

/// Throws `nixl::error(s)`: "<call>: <errno text> (errno <n>) [<file>:<line>]; <hint>".
[[noreturn]] void throw_posix(int err, const char* call, const char* file, int line,
                              status s = status::backend, std::string_view hint = {});

/// Logs a failed call at error level (no-throw form for destructors and the I/O path).
void report_posix(int err, const char* call, const char* file, int line) noexcept;

}  // namespace nixl::posix::detail

/// Evaluates a C call that returns a negative value on failure; throws `nixl::error(status)`
/// naming the call and the error, with `hint` (the fix, evaluated only on failure) appended.
#define NIXL_POSIX_CHECK_HINT(expr, status, hint) NIXL_POSIX_CHECK_IMPL_(expr, #expr, status, hint)

/// Evaluates a C call; throws `nixl::error(backend)` naming the call and the error when it fails.
#define NIXL_POSIX_CHECK(expr) \
  NIXL_POSIX_CHECK_IMPL_(expr, #expr, ::nixl::status::backend, ::std::string_view{})

// The call text is taken by the public macros, before their argument is macro-expanded.
#define NIXL_POSIX_CHECK_IMPL_(expr, text, status, hint)                                        \
  ([&] {                                                                                        \
    errno = 0;                                                                                  \
    const auto nixl_posix_r_ = (expr);                                                          \
    if (nixl_posix_r_ < 0)                                                                      \
      ::nixl::posix::detail::throw_posix(::nixl::posix::detail::errno_of(nixl_posix_r_, errno), \
                                         text, __FILE__, __LINE__, status, hint);               \
    return nixl_posix_r_;                                                                       \
  }())

/// Evaluates a C call; logs a failure and yields false, never throws.
#define NIXL_POSIX_WARN(expr)                                                                  \
  ([&]() noexcept {                                                                            \
    errno = 0;                                                                                 \
    const auto nixl_posix_r_ = (expr);                                                         \
    if (nixl_posix_r_ >= 0) return true;                                                       \
    ::nixl::posix::detail::report_posix(::nixl::posix::detail::errno_of(nixl_posix_r_, errno), \
                                        #expr, __FILE__, __LINE__);                            \
    return false;                                                                              \
  }())
