#pragma once
// What the LIBFABRIC backend's source files share.

#include <chrono>
#include <cstdint>
#include <memory>
#include <shared_mutex>

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

/// An engine of this process as the other engines of the process see it. libfabric's shm provider
/// (1.17 and later; efa too, through shm) reaches an endpoint of the same process through that
/// endpoint's own mapping of its shared-memory region, and keeps that pointer after the endpoint
/// closes: a send to it, an answer to one of its operations, even an address insert then touches
/// unmapped memory. So an engine is addressed only under `mu` (shared) while `alive`; its
/// teardown clears `alive` under `mu` (exclusive), and its endpoint stays open while another
/// engine of the process may still reach it (`engine::teardown`).
struct local_life {
  std::shared_mutex mu;
  bool alive = true;
};

/// Shared hold on an engine of this process for one call that addresses it; `ok` is false
/// once it is gone. Holds nothing for a peer of another process (`l` null).
class local_hold {
 public:
  explicit local_hold(local_life* l) noexcept {
    if (l != nullptr) {
      lk_ = std::shared_lock(l->mu);
      ok_ = l->alive;
    }
  }
  bool ok() const noexcept { return ok_; }

 private:
  std::shared_lock<std::shared_mutex> lk_;
  bool ok_ = true;
};

/// The engine of this process with identity `uid`: its life while it exists, else null, with
/// `gone` set when it existed and was destroyed (its addresses must not be inserted again).
std::shared_ptr<local_life> find_local(std::uint64_t uid, bool& gone);

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
