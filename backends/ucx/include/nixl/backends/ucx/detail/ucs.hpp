#pragma once
/// Move-only owners for UCX handles, and the NIXL status of a UCX error.

#include <cstddef>
#include <string_view>
#include <utility>

#include <ucp/api/ucp.h>

#include <nixl/backends/ucx/detail/check.hpp>
#include <nixl/status.hpp>

namespace nixl::ucx::detail {

/// The NIXL status for a UCX error on the data path.
constexpr status to_status(ucs_status_t s) noexcept {
  switch (s) {
    case UCS_OK:
      return status::success;
    case UCS_INPROGRESS:
      return status::in_progress;
    case UCS_ERR_CANCELED:
      return status::canceled;
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_IO_ERROR:
      return status::remote_disconnect;
    case UCS_ERR_INVALID_PARAM:
      return status::invalid_param;
    case UCS_ERR_UNSUPPORTED:
      return status::not_supported;
    default:
      return status::backend;
  }
}

/// A move-only owner of a UCX handle released by `Destroy` (a function of one argument).
template <class T, auto Destroy>
class unique_handle {
 public:
  unique_handle() = default;
  explicit unique_handle(T h) noexcept : h_(h) {}
  unique_handle(unique_handle&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  unique_handle& operator=(unique_handle&& o) noexcept {
    if (this != &o) reset(std::exchange(o.h_, T{}));
    return *this;
  }
  unique_handle(const unique_handle&) = delete;
  unique_handle& operator=(const unique_handle&) = delete;
  ~unique_handle() { reset(); }

  T get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != T{}; }
  T release() noexcept { return std::exchange(h_, T{}); }
  void reset(T h = T{}) noexcept {
    if (h_ != T{}) Destroy(h_);
    h_ = h;
  }

 private:
  T h_{};
};

using context_handle = unique_handle<ucp_context_h, &ucp_cleanup>;
using worker_handle = unique_handle<ucp_worker_h, &ucp_worker_destroy>;
using rkey_handle = unique_handle<ucp_rkey_h, &ucp_rkey_destroy>;
using config_handle = unique_handle<ucp_config_t*, &ucp_config_release>;

/// A registered memory region: `ucp_mem_unmap` needs the context as well as the handle. A
/// handle made without a context is borrowed (memory that `backend::allocate` owns).
class mem_handle {
 public:
  mem_handle() = default;
  mem_handle(ucp_context_h ctx, ucp_mem_h h) noexcept : ctx_(ctx), h_(h) {}
  static mem_handle borrowed(ucp_mem_h h) noexcept { return mem_handle(nullptr, h); }
  mem_handle(mem_handle&& o) noexcept
      : ctx_(std::exchange(o.ctx_, nullptr)), h_(std::exchange(o.h_, nullptr)) {}
  mem_handle& operator=(mem_handle&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::exchange(o.ctx_, nullptr);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~mem_handle() { reset(); }
  ucp_mem_h get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  void reset() noexcept {
    if (h_ != nullptr && ctx_ != nullptr) NIXL_UCX_WARN(ucp_mem_unmap(ctx_, h_));
    h_ = nullptr;
  }

 private:
  ucp_context_h ctx_ = nullptr;
  ucp_mem_h h_ = nullptr;
};

}  // namespace nixl::ucx::detail
