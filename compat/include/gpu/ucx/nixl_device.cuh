#ifndef _NIXL_DEVICE_CUH
#define _NIXL_DEVICE_CUH
/// NIXL's GPU device API (nixl_device.cuh of NIXL 1.4: nixlPut, nixlAtomicAdd, nixlGetPtr,
/// nixlGpuGetXferStatus) over nixl-cpp's device API (nixl/device.cuh), for memory views made by
/// nixlAgent::prepMemView. Installed as include/gpu/ucx/nixl_device.cuh; programs add that
/// folder to the include path and write `#include <nixl_device.cuh>`, as with NIXL.
///
/// Unlike NIXL's, it does not include UCX's device headers: views here are device-resident
/// arrays of pointers resolved on the host (same node: this process's VRAM, a peer's VRAM
/// mapped through CUDA IPC, or a peer agent's own pointer in this process). A put or an add
/// completes before it returns: it returns NIXL_IN_PROG as NIXL's does for any accepted
/// operation, and the status handle reads NIXL_SUCCESS at the first poll (as UCX's cuda_ipc
/// transport). A bad view or index is NIXL_ERR_BACKEND, never a fault. See docs/device.md.

#include <cstddef>
#include <cstdint>

#include <nixl_types.h>
#include <nixl/device.cuh>

#ifndef HAVE_UCX_GPU_DEVICE_API
/// The device API is available in this build (nixl_device.cuh and prepMemView).
#define HAVE_UCX_GPU_DEVICE_API 1
#endif

/// Threads that take part in one operation: NIXL's (and UCX's) level values. GRID is declared
/// for source compatibility and refused (NIXL_ERR_BACKEND), as UCX's cuda_ipc does not have it.
enum class nixl_gpu_level_t : uint64_t { THREAD = 0, WARP = 1, BLOCK = 2, GRID = 3 };

namespace nixl_gpu_flags {
/// The operation may wait for a later one (a hint; operations here complete at once).
constexpr uint64_t defer = 1;
}  // namespace nixl_gpu_flags

/// An element of a memory view: the view, the entry's index in it, a byte offset in the entry.
struct nixlMemViewElem {
  nixlMemViewH mvh;
  size_t index;
  size_t offset;
};

/// Completion of one operation. A plain aggregate (trivially default-constructible and
/// copyable: clients keep arrays of it in __shared__ memory and copy it by value).
struct nixlGpuXferStatusH {
  nixl_status_t status;
  uint32_t reserved0;
  uint64_t reserved[7];
};

namespace nixl_device_detail {

template <nixl_gpu_level_t L>
__host__ __device__ constexpr nixl::device::level level_of() {
  return L == nixl_gpu_level_t::WARP    ? nixl::device::level::warp
         : L == nixl_gpu_level_t::BLOCK ? nixl::device::level::block
                                        : nixl::device::level::thread;
}

__device__ inline nixl_status_t finish(nixl::device::result r, nixlGpuXferStatusH* s) {
  const nixl_status_t st = r == nixl::device::result::ok ? NIXL_SUCCESS : NIXL_ERR_BACKEND;
  if (s != nullptr) s->status = st;
  return r == nixl::device::result::ok ? NIXL_IN_PROG : NIXL_ERR_BACKEND;
}

/// An operation at level `L`: GRID is refused (a bad view); otherwise `op()`'s result, stored in
/// the status handle `s` if any.
template <nixl_gpu_level_t L, class Op>
__device__ inline nixl_status_t run(nixlGpuXferStatusH* s, Op&& op) {
  if constexpr (L == nixl_gpu_level_t::GRID) {
    return finish(nixl::device::result::bad_view, s);
  } else {
    return finish(op(), s);
  }
}

}  // namespace nixl_device_detail

/// Copies `size` bytes from `src` (an element of a local view) to `dst` (an element of a remote
/// view). NIXL_IN_PROG when done (the status handle, if any, reads NIXL_SUCCESS);
/// NIXL_ERR_BACKEND for a bad view, index or range. `channel_id` and `flags` are accepted.
template <nixl_gpu_level_t L = nixl_gpu_level_t::THREAD>
__device__ inline nixl_status_t nixlPut(const nixlMemViewElem& src, const nixlMemViewElem& dst,
                                        size_t size, [[maybe_unused]] unsigned channel_id = 0,
                                        [[maybe_unused]] uint64_t flags = 0,
                                        nixlGpuXferStatusH* xfer_status = nullptr) {
  return nixl_device_detail::run<L>(xfer_status, [&] {
    return nixl::device::put<nixl_device_detail::level_of<L>()>(
        nixl::device::local_view(src.mvh), src.index, src.offset,
        nixl::device::remote_view(dst.mvh), dst.index, dst.offset, size);
  });
}

/// Adds `value` to the 64-bit counter at `counter` (an element of a remote view), after the
/// caller's earlier writes are visible; only the group's first thread adds.
template <nixl_gpu_level_t L = nixl_gpu_level_t::THREAD>
__device__ inline nixl_status_t nixlAtomicAdd(uint64_t value, const nixlMemViewElem& counter,
                                              [[maybe_unused]] unsigned channel_id = 0,
                                              [[maybe_unused]] uint64_t flags = 0,
                                              nixlGpuXferStatusH* xfer_status = nullptr) {
  return nixl_device_detail::run<L>(xfer_status, [&] {
    return nixl::device::atomic_add<nixl_device_detail::level_of<L>()>(
        value, nixl::device::remote_view(counter.mvh), counter.index, counter.offset);
  });
}

/// The status a put or add stored: NIXL_SUCCESS once complete (at once here), or its error.
template <nixl_gpu_level_t L = nixl_gpu_level_t::THREAD>
__device__ inline nixl_status_t nixlGpuGetXferStatus(nixlGpuXferStatusH& xfer_status) {
  return xfer_status.status;
}

/// Where entry `index` of a remote view starts in this process (stores through it reach the
/// peer), or nullptr for a placeholder, a bad index or a released view.
__device__ inline void* nixlGetPtr(nixlMemViewH mvh, size_t index) {
  return nixl::device::get_ptr(nixl::device::remote_view(mvh), index);
}

#endif
