// CUDA IPC mappings of peer processes' memory, shared by every backend of the process.
//
// cudaIpcOpenMemHandle maps a whole allocation; several registered regions of a peer (tensors
// of one caching-allocator segment) share it, and one process may open a handle only once per
// GPU. Mappings are therefore kept per (handle, GPU).

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>

#include "internal.hpp"

namespace nixl::cuda::detail {

namespace {

static_assert(CUDA_IPC_HANDLE_SIZE == ipc_handle_size, "remote_region::ipc_handle holds 64 bytes");

struct ipc_mapping {
  void* base = nullptr;
  int device = -1;
  std::size_t refs = 0;
};

using ipc_key = std::pair<std::array<char, ipc_handle_size>, int>;

struct ipc_table {
  std::mutex mu;
  std::map<ipc_key, ipc_mapping> open;
  std::map<void*, ipc_key> by_base;
};

ipc_table& ipc() {
  static ipc_table t;
  return t;
}

}  // namespace

void* ipc_open(const std::array<char, ipc_handle_size>& h, int device) {
  auto& t = ipc();
  std::lock_guard lk(t.mu);
  auto it = t.open.find({h, device});
  if (it != t.open.end()) {
    ++it->second.refs;
    return it->second.base;
  }
  cudaIpcMemHandle_t handle{};
  std::memcpy(handle.reserved, h.data(), h.size());
  device_guard g(device);
  void* base = nullptr;
  NIXL_CUDA_CHECK_HINT(
      cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess),
      "the peer's memory could not be mapped: it must be alive, in a process of this host that "
      "sees the same GPUs, and allocated with cudaMalloc (not cuMemCreate/VMM)");
  t.open.emplace(ipc_key{h, device}, ipc_mapping{base, device, 1});
  t.by_base.emplace(base, ipc_key{h, device});
  return base;
}

void ipc_close(void* base) noexcept {
  auto& t = ipc();
  std::lock_guard lk(t.mu);
  auto b = t.by_base.find(base);
  if (b == t.by_base.end()) return;
  auto it = t.open.find(b->second);
  if (it != t.open.end() && --it->second.refs == 0) {
    device_guard g(it->second.device);
    (void)NIXL_CUDA_WARN(cudaIpcCloseMemHandle(base));
    t.open.erase(it);
    t.by_base.erase(b);
  }
}

}  // namespace nixl::cuda::detail
