#pragma once
/// Request state of the CUDA backend: what `backend::post` and `backend::check` (inline in
/// <nixl/backends/cuda.hpp>) work on. Internal.

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda/detail/check.hpp>
#include <nixl/backends/cuda/detail/copy.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>

namespace nixl::cuda::detail {

/// Owns a CUDA event; waits for it before destroying it.
class event_handle {
 public:
  event_handle() = default;
  explicit event_handle(cudaEvent_t e) noexcept : e_(e) {}
  event_handle(event_handle&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  event_handle& operator=(event_handle&& o) noexcept {
    if (this != &o) {
      reset();
      e_ = o.e_;
      o.e_ = nullptr;
    }
    return *this;
  }
  ~event_handle() { reset(); }
  cudaEvent_t get() const noexcept { return e_; }
  void reset() noexcept;

 private:
  cudaEvent_t e_ = nullptr;
};

/// Owns device memory from cudaMalloc.
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(void* p, int dev) noexcept : p_(p), dev_(dev) {}
  device_buffer(device_buffer&& o) noexcept : p_(o.p_), dev_(o.dev_) { o.p_ = nullptr; }
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      dev_ = o.dev_;
      o.p_ = nullptr;
    }
    return *this;
  }
  ~device_buffer() { reset(); }
  void* get() const noexcept { return p_; }
  void reset() noexcept;

 private:
  void* p_ = nullptr;
  int dev_ = -1;
};

/// The part of a request that runs on one GPU.
struct lane {
  int device = -1;
  cudaStream_t stream = nullptr;
  device_buffer items;  // kernel items, in device memory
  event_handle done;    // recorded after the lane's work
  std::uint32_t kernel_count = 0;
  std::uint32_t grid = 0;
  std::vector<copy_item> engine;  // copies for the copy engines

  /// Issues the lane's copies and records `done`; false (logged) when a call fails.
  bool issue() noexcept {
    const device_guard g(device);
    if (!g.ok()) return false;
    for (const copy_item& it : engine)
      if (!NIXL_CUDA_WARN(cudaMemcpyAsync(reinterpret_cast<void*>(it.dst),
                                          reinterpret_cast<const void*>(it.src), it.len,
                                          cudaMemcpyDefault, stream)))
        return false;
    if (kernel_count != 0 &&
        !NIXL_CUDA_WARN(launch_batch_copy(static_cast<const copy_item*>(items.get()), kernel_count,
                                          grid, stream)))
      return false;
    return NIXL_CUDA_WARN(cudaEventRecord(done.get(), stream));
  }
};

}  // namespace nixl::cuda::detail
