// DRAM <-> VRAM of one host through the CUDA driver (`host_vram_copy=cuda`), over the process's
// one CUDA driver (nixl/detail/cuda_driver.hpp: loaded at run time, one primary context and
// stream per device) and its one table of CUDA IPC mappings (nixl/detail/cuda_ipc.hpp); what is
// the UCX backend's own: host memory pinned on first use, UCX's cuda_ipc key, the copies.
//
// Why: UCX 1.22 moves host memory into the GPU memory of another UCX context (another process,
// or another agent of this process) only through host staging: cuda_copy reaches its own
// context only (its interface id is random per context) and cuda_ipc takes GPU memory alone
// as the local buffer (access_mem_types = CUDA). The put or get then becomes put/rndv with a
// rndv/get/mtype or rndv/rtr/mtype receive (UCX_RMA_PPLN_ENABLE=y), or software emulation: a
// CPU copy between the processes (cma, shared memory) and a copy per fragment to or from the
// GPU (docs/ucx.md, "GPU memory"). The driver copies host <-> GPU directly, at the copy
// engine's speed, once the host pages are pinned and the peer's GPU memory is mapped here:
// through the CUDA IPC handle the peer exports with the region (its region data), else through
// UCX's cuda_ipc key (ucp_rkey_ptr), which UCX unpacks only where an endpoint has a cuda_ipc
// lane (not for a process whose side is host memory).

#include <iterator>
#include <map>
#include <mutex>
#include <optional>

#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::ucx::detail {
namespace {

namespace cu = nixl::detail::cu;

/// The driver when it has what the copies need (cuMemcpyAsync, cuStreamSynchronize,
/// cuMemHostRegister, cuMemHostUnregister), else null: DRAM <-> VRAM stays with UCX.
cu::driver* drv() noexcept {
  static cu::driver* d = [] {
    cu::driver* x = cu::usable_driver();
    const char* m = x != nullptr ? x->lacks({"cuStreamSynchronize", "cuMemcpyAsync",
                                             "cuMemHostRegister_v2", "cuMemHostUnregister"})
                                 : nullptr;
    if (x == nullptr || m != nullptr) {
      log::debug("UCX: DRAM <-> VRAM stays with UCX: the CUDA driver copies need {}",
                 x == nullptr ? cu::get_driver().why
                              : fmt::format("the CUDA driver (libcuda.so.1) with {}", m));
      return static_cast<cu::driver*>(nullptr);
    }
    return x;
  }();
  return d;
}

/// Host ranges this process pinned here: start -> (length, context it was pinned in).
struct pinned_ranges {
  std::mutex mu;
  std::map<std::uintptr_t, std::pair<std::size_t, cu::CUcontext>> at;
  static pinned_ranges& get() {
    static auto* p = new pinned_ranges;  // used by deregistrations until the process ends
    return *p;
  }
};

/// The primary context and stream of the device holding `p` (a device address valid here),
/// asked through device `dev_hint`.
cu::device_res* device_of(cu::driver* d, cu::CUdeviceptr p, std::uint64_t dev_hint) noexcept {
  cu::device_res* hint = d->device(d->clamp(dev_hint));
  if (hint == nullptr) return nullptr;
  int ordinal = -1;
  {
    cu::ctx_scope cs(*d, hint->ctx);
    if (!cs.ok() || d->pointer_attr(&ordinal, cu::attr_device_ordinal, p) != cu::success)
      return nullptr;
  }
  return d->device(ordinal);
}

}  // namespace

namespace gpu {

std::optional<ipc_export> export_vram(std::uintptr_t addr, std::size_t len,
                                      std::uint64_t dev_hint) noexcept {
  if (drv() == nullptr || addr == 0) return std::nullopt;
  try {
    std::string err;
    auto x = cu::export_ipc(addr, len, dev_hint, err);
    if (!x) log::debug("UCX: VRAM at {:#x}: {}; not exported", addr, err);
    return x;
  } catch (...) {
    return std::nullopt;
  }
}

std::shared_ptr<ipc_mapping> open_ipc(const ipc_export& x, const void* keeper) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return nullptr;
  try {
    const int dev = d->ordinal_of(x.uuid.data());
    if (dev < 0) {
      log::debug("UCX: the peer's GPU is not visible in this process; its VRAM stays with UCX");
      return nullptr;
    }
    std::string err;
    auto m = cu::open_ipc(x.handle, dev, err, keeper);
    if (!m) log::debug("UCX: {} (a peer's VRAM); it stays with UCX", err);
    return m;
  } catch (...) {
    return nullptr;
  }
}

mapped where(const ipc_mapping& m) noexcept {
  const cu::ipc_view& v = m.view();
  return {v.base, located{v.ctx, v.stream}, v.size};
}

std::optional<located> locate(const void* vram, std::uint64_t dev_hint) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return std::nullopt;
  cu::device_res* r = device_of(d, reinterpret_cast<cu::CUdeviceptr>(vram), dev_hint);
  if (r == nullptr) return std::nullopt;
  return located{r->ctx, r->stream};
}

void* map_remote(ucp_rkey_h rkey, std::uint64_t raddr, std::uint64_t dev_hint) noexcept {
  cu::driver* d = drv();
  if (d == nullptr || rkey == nullptr) return nullptr;
  cu::device_res* r = d->device(d->clamp(dev_hint));
  if (r == nullptr) return nullptr;
  cu::ctx_scope cs(*d, r->ctx);
  if (!cs.ok()) return nullptr;
  // cuda_ipc maps the peer's allocation in the current context's device (and caches it).
  void* p = nullptr;
  const ucs_status_t s = ucp_rkey_ptr(rkey, raddr, &p);
  if (s != UCS_OK) {
    log::debug("UCX: ucp_rkey_ptr({:#x}): {}", raddr, ucs_status_string(s));
    return nullptr;
  }
  return p;
}

void pin(std::uintptr_t addr, std::size_t len, std::uint64_t dev_hint) noexcept {
  cu::driver* d = drv();
  if (d == nullptr || addr == 0 || len == 0) return;
  cu::device_res* r = d->device(d->clamp(dev_hint));
  if (r == nullptr) return;
  pinned_ranges& pr = pinned_ranges::get();
  std::lock_guard lk(pr.mu);
  auto it = pr.at.upper_bound(addr);
  if (it != pr.at.begin()) {
    auto prev = std::prev(it);
    if (addr - prev->first < prev->second.first) return;  // inside a range pinned here
  }
  if (it != pr.at.end() && it->first - addr < len) return;  // overlaps a later one
  cu::ctx_scope cs(*d, r->ctx);
  if (!cs.ok()) return;
  unsigned type = 0;
  // Known to CUDA already (cudaMallocHost, cudaHostRegister, UCX's cuda_copy registration).
  if (d->pointer_attr(&type, cu::attr_memory_type, static_cast<cu::CUdeviceptr>(addr)) ==
      cu::success)
    return;
  const cu::CUresult res =
      d->host_register(reinterpret_cast<void*>(addr), len, cu::host_register_portable);
  try {
    if (res != cu::success) {
      log::warn(
          "UCX: cuMemHostRegister({:#x}, {} bytes): {}; DRAM <-> VRAM copies of it stay "
          "pageable (slower)",
          addr, len, d->what(res));
      return;
    }
    pr.at.emplace(addr, std::make_pair(len, r->ctx));
  } catch (...) {
    (void)d->host_unregister(reinterpret_cast<void*>(addr));
  }
}

void unpin_range(std::uintptr_t addr, std::size_t len) noexcept {
  cu::driver* d = cu::driver_if_loaded();
  if (d == nullptr || d->host_unregister == nullptr) return;
  pinned_ranges& pr = pinned_ranges::get();
  std::lock_guard lk(pr.mu);
  for (auto it = pr.at.lower_bound(addr); it != pr.at.end() && it->first - addr < len;) {
    cu::ctx_scope cs(*d, it->second.second);
    if (const cu::CUresult res = d->host_unregister(reinterpret_cast<void*>(it->first));
        res != cu::success) {
      try {
        log::warn("UCX: cuMemHostUnregister({:#x}): {}", it->first, d->what(res));
      } catch (...) {
      }
    }
    it = pr.at.erase(it);
  }
}

}  // namespace gpu

status gpu_copy(std::span<const gpu_item> items) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return status::backend;
  constexpr std::size_t max_streams = 8;
  std::pair<cu::CUcontext, cu::CUstream> used[max_streams];
  std::size_t nused = 0;
  status st = status::success;
  auto report = [&](const char* what, cu::CUresult res, const gpu_item* it) noexcept {
    st = status::backend;
    try {
      if (it == nullptr)
        log::error("UCX: DRAM <-> VRAM copy: {}: {}", what, d->what(res));
      else
        log::error("UCX: DRAM <-> VRAM copy of {} bytes ({} -> {}): {}", it->len, it->src, it->dst,
                   d->what(res));
    } catch (...) {
    }
  };
  auto sync = [&](cu::CUcontext c, cu::CUstream s) {
    cu::ctx_scope cs(*d, c);
    if (const cu::CUresult res = d->stream_sync(s); res != cu::success)
      report("cuStreamSynchronize", res, nullptr);
  };
  for (const gpu_item& it : items) {
    {
      cu::ctx_scope cs(*d, it.ctx);
      const cu::CUresult res =
          cs.ok() ? d->memcpy_async(reinterpret_cast<cu::CUdeviceptr>(it.dst),
                                    reinterpret_cast<cu::CUdeviceptr>(it.src), it.len, it.stream)
                  : cu::error_invalid_context;
      if (res != cu::success) {
        report("cuMemcpyAsync", res, &it);
        break;
      }
    }
    bool seen = false;
    for (std::size_t i = 0; i < nused; ++i) seen = seen || used[i].second == it.stream;
    if (seen) continue;
    if (nused == max_streams) {
      for (std::size_t i = 0; i < nused; ++i) sync(used[i].first, used[i].second);
      nused = 0;
    }
    used[nused++] = {it.ctx, it.stream};
  }
  // Also after an error: what was issued finishes before the caller may reuse the buffers.
  for (std::size_t i = 0; i < nused; ++i) sync(used[i].first, used[i].second);
  return st;
}

}  // namespace nixl::ucx::detail
