#pragma once
// What the source files of the CUDA backend share and its users do not.

#include <array>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/cuda/check.hpp>

#include "wire.hpp"

namespace nixl::cuda::detail {

inline std::string hex(std::uintptr_t v) {
  return fmt::format("{:#x}", v);
}

// Whether GPUs reach host pointer `p` (pinned and mapped), and at which address.
inline bool host_device_pointer(const void* p, std::uintptr_t& dev) noexcept {
  cudaPointerAttributes a{};
  if (clear_error(cudaPointerGetAttributes(&a, p)) != cudaSuccess) return false;
  if (a.type != cudaMemoryTypeHost || a.devicePointer == nullptr) return false;
  dev = reinterpret_cast<std::uintptr_t>(a.devicePointer);
  return true;
}

/// Maps a peer process's allocation on `device`, or takes a reference on the mapping this
/// process holds already: mappings are kept per (IPC handle, GPU) for the whole process, in the
/// table every backend shares (nixl/detail/cuda_ipc.hpp), since a process may open a handle once
/// per GPU and several regions share one allocation. Throws `nixl::error` naming the fix.
void* ipc_open(const std::array<char, ipc_handle_size>& handle, int device);
/// Drops a reference taken by `ipc_open`; the last one unmaps.
void ipc_close(void* base) noexcept;

/// Throws `nixl::error(not_supported)` saying why `rr` of `p` is out of this backend's reach.
[[noreturn]] void refuse(const backend::peer& p, const backend::remote_region& rr);

}  // namespace nixl::cuda::detail
