#pragma once
/// The batched copy kernel of the CUDA backend: many small copies in one launch. Internal.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

namespace nixl::cuda::detail {

/// One copy of `len` bytes from `src` to `dst`, both addresses the executing GPU can reach
/// (its own memory, a peer GPU's memory with peer access enabled, or mapped pinned host memory).
struct copy_item {
  std::uint64_t src = 0;
  std::uint64_t dst = 0;
  std::uint64_t len = 0;
};
static_assert(sizeof(copy_item) == 24);

/// Threads per block of the batch kernel.
inline constexpr unsigned copy_threads = 256;

/// A copy longer than this is cut into pieces of this size so that blocks share the work evenly.
inline constexpr std::size_t copy_chunk = 64 * 1024;

/// Appends `item` to `out`, cut into pieces of at most `chunk` bytes.
inline void append_chunked(std::vector<copy_item>& out, copy_item item,
                           std::size_t chunk = copy_chunk) {
  while (item.len > chunk) {
    out.push_back({item.src, item.dst, chunk});
    item.src += chunk;
    item.dst += chunk;
    item.len -= chunk;
  }
  if (item.len != 0) out.push_back(item);
}

/// Grid size for `count` items on a GPU with `sm_count` multiprocessors.
inline std::uint32_t copy_grid(std::size_t count, int sm_count) noexcept {
  const std::size_t cap = static_cast<std::size_t>(sm_count > 0 ? sm_count : 1) * 8;
  return static_cast<std::uint32_t>(count < cap ? count : cap);
}

/// Launches one grid on `stream` that performs every item of `items` (an array in memory the
/// GPU reads: device memory or mapped pinned memory). The calling thread's current device must
/// be the stream's device. Returns the error of the launch.
cudaError_t launch_batch_copy(const copy_item* items, std::uint32_t count, std::uint32_t grid,
                              cudaStream_t stream) noexcept;

}  // namespace nixl::cuda::detail
