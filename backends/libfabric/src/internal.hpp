#pragma once
// What the LIBFABRIC backend's source files share.

#include <chrono>
#include <cstdint>

#include <cerrno>

#include <rdma/fi_errno.h>

#include <nixl/backends/libfabric.hpp>
#include <nixl/backends/libfabric/check.hpp>

namespace nixl::libfabric::detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A completion error (positive errno of fi_cq_err_entry, or a negative return) as a status.
inline status to_status(long err) noexcept {
  const long e = err < 0 ? -err : err;
  switch (e) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ETIMEDOUT:
    case EPIPE:
    case FI_EIO:
    case FI_ESHUTDOWN:
    case FI_EADDRNOTAVAIL:
      return status::remote_disconnect;
    case FI_ECANCELED:
      return status::canceled;
    case FI_EINVAL:
      return status::invalid_param;
    default:
      return status::backend;
  }
}

}  // namespace nixl::libfabric::detail
