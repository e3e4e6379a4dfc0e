// CUDA IPC mappings of peer processes' memory: the process's one table of them
// (nixl/detail/cuda_ipc.hpp), which the UCX backend's driver copies share.
//
// cudaIpcOpenMemHandle maps a whole allocation; several registered regions of a peer (tensors
// of one caching-allocator segment) share it, and one process may open a handle only once per
// GPU. Mappings are therefore kept per (handle, GPU), in the GPU's primary context (the one the
// runtime uses).

#include <string>

#include <nixl/detail/cuda_ipc.hpp>
#include <nixl/status.hpp>

#include "internal.hpp"

namespace nixl::cuda::detail {

static_assert(CUDA_IPC_HANDLE_SIZE == ipc_handle_size, "remote_region::ipc_handle holds 64 bytes");
static_assert(ipc_handle_size == std::tuple_size_v<nixl::detail::cu::ipc_handle>);

void* ipc_open(const std::array<char, ipc_handle_size>& h, int device) {
  std::string err;
  const auto v = nixl::detail::cu::ipc_table::get().acquire(h, device, err);
  if (!v)
    raise(status::backend,
          "{} (GPU {}); the peer's memory could not be mapped: it must be alive, in a process of "
          "this host that sees the same GPUs, and allocated with cudaMalloc (not cuMemCreate/VMM)",
          err, device);
  return v->base;
}

void ipc_close(void* base) noexcept {
  nixl::detail::cu::ipc_table::get().release_base(base);
}

}  // namespace nixl::cuda::detail
