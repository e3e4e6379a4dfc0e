// DRAM <-> VRAM of one host through the CUDA driver (`host_vram_copy=cuda`): the driver loaded
// at run time, one primary context and stream per device, host memory pinned on first use.
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

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::ucx::detail {
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUstream = void*;
struct cu_uuid {
  char bytes[16];
};
struct cu_ipc_handle {
  char reserved[64];
};
constexpr unsigned ipc_lazy_enable_peer_access = 1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
constexpr CUresult cuda_success = 0;
constexpr int attr_memory_type = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int attr_device_ordinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned host_register_portable = 1;
constexpr unsigned stream_non_blocking = 1;

struct device_res {
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  bool tried = false;
};

struct driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_push)(CUcontext) = nullptr;
  CUresult (*ctx_pop)(CUcontext*) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_sync)(CUstream) = nullptr;
  CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*host_register)(void*, std::size_t, unsigned) = nullptr;
  CUresult (*host_unregister)(void*) = nullptr;
  CUresult (*pointer_attr)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*device_uuid)(cu_uuid*, CUdevice) = nullptr;
  CUresult (*addr_range)(CUdeviceptr*, std::size_t*, CUdeviceptr) = nullptr;
  CUresult (*ipc_get)(cu_ipc_handle*, CUdeviceptr) = nullptr;
  CUresult (*ipc_open)(CUdeviceptr*, cu_ipc_handle, unsigned) = nullptr;
  CUresult (*ipc_close)(CUdeviceptr) = nullptr;
  bool ipc = false;  ///< the IPC calls above were found

  int devices = 0;
  std::mutex mu;
  std::unique_ptr<device_res[]> dev;
  /// Host ranges this process pinned here: start -> (length, context it was pinned in).
  std::map<std::uintptr_t, std::pair<std::size_t, CUcontext>> pinned;
  /// Peer allocations opened here: handle -> (address here, holders, device).
  struct opened {
    CUdeviceptr base = 0;
    std::size_t holders = 0;
    int device = -1;
    std::size_t size = 0;  ///< of the opened allocation, as the driver maps it here
  };
  std::map<std::array<char, 64>, opened> ipc_open_;

  const char* what(CUresult r) const noexcept {
    const char* s = nullptr;
    if (error_string == nullptr || error_string(r, &s) != cuda_success || s == nullptr)
      return "unknown CUDA error";
    return s;
  }

  template <class F>
  bool sym(F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(lib, name));
    return f != nullptr;
  }

  bool load() {
    lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    const bool ok =
        sym(init, "cuInit") && sym(device_count, "cuDeviceGetCount") &&
        sym(device_get, "cuDeviceGet") && sym(ctx_retain, "cuDevicePrimaryCtxRetain") &&
        sym(ctx_push, "cuCtxPushCurrent_v2") && sym(ctx_pop, "cuCtxPopCurrent_v2") &&
        sym(stream_create, "cuStreamCreate") && sym(stream_sync, "cuStreamSynchronize") &&
        sym(memcpy_async, "cuMemcpyAsync") && sym(host_register, "cuMemHostRegister_v2") &&
        sym(host_unregister, "cuMemHostUnregister") && sym(pointer_attr, "cuPointerGetAttribute") &&
        sym(error_string, "cuGetErrorString");
    if (!ok || init(0) != cuda_success || device_count(&devices) != cuda_success || devices <= 0)
      return false;
    if (!sym(device_uuid, "cuDeviceGetUuid_v2")) (void)sym(device_uuid, "cuDeviceGetUuid");
    ipc = device_uuid != nullptr && sym(addr_range, "cuMemGetAddressRange_v2") &&
          sym(ipc_get, "cuIpcGetMemHandle") && sym(ipc_open, "cuIpcOpenMemHandle_v2") &&
          sym(ipc_close, "cuIpcCloseMemHandle");
    dev = std::make_unique<device_res[]>(static_cast<std::size_t>(devices));
    return true;
  }

  /// The primary context and copy stream of device `d` (created once), or null.
  device_res* device(int d) {
    if (d < 0 || d >= devices) return nullptr;
    std::lock_guard lk(mu);
    device_res& r = dev[static_cast<std::size_t>(d)];
    if (!r.tried) {
      r.tried = true;
      CUdevice cd = 0;
      CUcontext c = nullptr;
      if (device_get(&cd, d) == cuda_success && ctx_retain(&c, cd) == cuda_success) {
        CUstream s = nullptr;
        if (ctx_push(c) == cuda_success) {
          if (stream_create(&s, stream_non_blocking) == cuda_success) {
            r.ctx = c;
            r.stream = s;
          }
          CUcontext popped = nullptr;
          (void)ctx_pop(&popped);
        }
      }
      if (r.stream == nullptr)
        log::warn("UCX: CUDA device {}: no context or stream; its DRAM <-> VRAM stays with UCX", d);
    }
    return r.stream != nullptr ? &r : nullptr;
  }
};

std::atomic<driver*> loaded{nullptr};

driver* drv() noexcept {
  // Loaded on the first DRAM <-> VRAM request and kept for the process (contexts and streams
  // are never released: the driver tears them down at exit).
  static driver* d = [] {
    auto* x = new driver;
    if (!x->load()) {
      log::debug("UCX: no usable CUDA driver (libcuda.so.1); DRAM <-> VRAM stays with UCX");
      if (x->lib != nullptr) ::dlclose(x->lib);
      delete x;
      return static_cast<driver*>(nullptr);
    }
    loaded.store(x, std::memory_order_release);
    return x;
  }();
  return d;
}

/// The driver when something loaded it already (deregistration must not load it).
driver* drv_if_loaded() noexcept {
  return loaded.load(std::memory_order_acquire);
}

/// Pushes `ctx` for the scope.
class ctx_scope {
 public:
  ctx_scope(driver* d, CUcontext c) noexcept : d_(d), ok_(d->ctx_push(c) == cuda_success) {}
  ~ctx_scope() {
    CUcontext popped = nullptr;
    if (ok_) (void)d_->ctx_pop(&popped);
  }
  ctx_scope(const ctx_scope&) = delete;
  ctx_scope& operator=(const ctx_scope&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  driver* d_;
  bool ok_;
};

int clamp_device(driver* d, std::uint64_t hint) noexcept {
  return hint < static_cast<std::uint64_t>(d->devices) ? static_cast<int>(hint) : 0;
}

}  // namespace

struct ipc_mapping {
  driver* d = nullptr;
  std::array<char, 64> key{};
  char* base = nullptr;
  std::size_t size = 0;
  gpu::located loc;
  ipc_mapping() = default;
  ipc_mapping(const ipc_mapping&) = delete;
  ipc_mapping& operator=(const ipc_mapping&) = delete;
  ~ipc_mapping() {
    if (d == nullptr) return;
    std::lock_guard lk(d->mu);
    auto it = d->ipc_open_.find(key);
    if (it == d->ipc_open_.end() || --it->second.holders != 0) return;
    {
      ctx_scope cs(d, loc.ctx);
      if (const CUresult r = d->ipc_close(it->second.base); r != cuda_success)
        log::warn("UCX: cuIpcCloseMemHandle of a peer's VRAM: {}", d->what(r));
    }
    d->ipc_open_.erase(it);
  }
};

namespace gpu {

std::optional<ipc_export> export_vram(std::uintptr_t addr, std::size_t len,
                                      std::uint64_t dev_hint) noexcept {
  driver* d = drv();
  if (d == nullptr || !d->ipc || addr == 0) return std::nullopt;
  device_res* hint = d->device(clamp_device(d, dev_hint));
  if (hint == nullptr) return std::nullopt;
  int ordinal = -1;
  {
    ctx_scope cs(d, hint->ctx);
    if (!cs.ok() || d->pointer_attr(&ordinal, attr_device_ordinal,
                                    static_cast<CUdeviceptr>(addr)) != cuda_success)
      return std::nullopt;
  }
  device_res* r = d->device(ordinal);
  CUdevice cd = 0;
  cu_uuid u{};
  if (r == nullptr || d->device_get(&cd, ordinal) != cuda_success ||
      d->device_uuid(&u, cd) != cuda_success)
    return std::nullopt;
  ctx_scope cs(d, r->ctx);
  if (!cs.ok()) return std::nullopt;
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (const CUresult res = d->addr_range(&base, &size, static_cast<CUdeviceptr>(addr));
      res != cuda_success || addr < base || addr - base > size || len > size - (addr - base)) {
    log::debug("UCX: VRAM at {:#x}: no allocation range ({}); not exported", addr,
               res != cuda_success ? d->what(res) : "region outside it");
    return std::nullopt;
  }
  cu_ipc_handle h{};
  if (const CUresult res = d->ipc_get(&h, base); res != cuda_success) {
    log::debug("UCX: VRAM at {:#x}: cuIpcGetMemHandle: {}; not exported", addr, d->what(res));
    return std::nullopt;
  }
  ipc_export x;
  std::memcpy(x.handle.data(), h.reserved, x.handle.size());
  std::memcpy(x.uuid.data(), u.bytes, x.uuid.size());
  x.offset = addr - base;
  x.alloc_len = size;
  return x;
}

std::shared_ptr<ipc_mapping> open_ipc(const ipc_export& x) noexcept {
  driver* d = drv();
  if (d == nullptr || !d->ipc) return nullptr;
  int dev = -1;
  for (int i = 0; i < d->devices && dev < 0; ++i) {
    CUdevice cd = 0;
    cu_uuid u{};
    if (d->device_get(&cd, i) == cuda_success && d->device_uuid(&u, cd) == cuda_success &&
        std::memcmp(u.bytes, x.uuid.data(), x.uuid.size()) == 0)
      dev = i;
  }
  if (dev < 0) {
    log::debug("UCX: the peer's GPU is not visible in this process; its VRAM stays with UCX");
    return nullptr;
  }
  device_res* r = d->device(dev);
  if (r == nullptr) return nullptr;
  try {
    auto m = std::make_shared<ipc_mapping>();
    std::lock_guard lk(d->mu);
    auto it = d->ipc_open_.find(x.handle);
    if (it == d->ipc_open_.end()) {
      ctx_scope cs(d, r->ctx);
      if (!cs.ok()) return nullptr;
      cu_ipc_handle h{};
      std::memcpy(h.reserved, x.handle.data(), x.handle.size());
      CUdeviceptr base = 0;
      if (const CUresult res = d->ipc_open(&base, h, ipc_lazy_enable_peer_access);
          res != cuda_success) {
        log::debug("UCX: cuIpcOpenMemHandle of a peer's VRAM: {}; it stays with UCX", d->what(res));
        return nullptr;
      }
      CUdeviceptr b = 0;
      std::size_t size = 0;
      if (d->addr_range(&b, &size, base) != cuda_success || b != base) size = 0;
      it = d->ipc_open_.emplace(x.handle, driver::opened{base, 0, dev, size}).first;
    }
    ++it->second.holders;
    m->d = d;
    m->key = x.handle;
    m->base = reinterpret_cast<char*>(it->second.base);
    m->size = it->second.size;
    m->loc = located{r->ctx, r->stream};
    return m;
  } catch (...) {
    return nullptr;
  }
}

mapped where(const ipc_mapping& m) noexcept {
  return {m.base, m.loc, m.size};
}

std::optional<located> locate(const void* vram, std::uint64_t dev_hint) noexcept {
  driver* d = drv();
  if (d == nullptr) return std::nullopt;
  device_res* hint = d->device(clamp_device(d, dev_hint));
  if (hint == nullptr) return std::nullopt;
  int ordinal = -1;
  {
    ctx_scope cs(d, hint->ctx);
    if (!cs.ok() || d->pointer_attr(&ordinal, attr_device_ordinal,
                                    reinterpret_cast<CUdeviceptr>(vram)) != cuda_success)
      return std::nullopt;
  }
  device_res* r = d->device(ordinal);
  if (r == nullptr) return std::nullopt;
  return located{r->ctx, r->stream};
}

void* map_remote(ucp_rkey_h rkey, std::uint64_t raddr, std::uint64_t dev_hint) noexcept {
  driver* d = drv();
  if (d == nullptr || rkey == nullptr) return nullptr;
  device_res* r = d->device(clamp_device(d, dev_hint));
  if (r == nullptr) return nullptr;
  ctx_scope cs(d, r->ctx);
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
  driver* d = drv();
  if (d == nullptr || addr == 0 || len == 0) return;
  device_res* r = d->device(clamp_device(d, dev_hint));
  if (r == nullptr) return;
  std::lock_guard lk(d->mu);
  auto it = d->pinned.upper_bound(addr);
  if (it != d->pinned.begin()) {
    auto prev = std::prev(it);
    if (addr - prev->first < prev->second.first) return;  // inside a range pinned here
  }
  if (it != d->pinned.end() && it->first - addr < len) return;  // overlaps a later one
  ctx_scope cs(d, r->ctx);
  if (!cs.ok()) return;
  unsigned type = 0;
  // Known to CUDA already (cudaMallocHost, cudaHostRegister, UCX's cuda_copy registration).
  if (d->pointer_attr(&type, attr_memory_type, static_cast<CUdeviceptr>(addr)) == cuda_success)
    return;
  const CUresult res = d->host_register(reinterpret_cast<void*>(addr), len, host_register_portable);
  if (res != cuda_success) {
    log::warn(
        "UCX: cuMemHostRegister({:#x}, {} bytes): {}; DRAM <-> VRAM copies of it stay "
        "pageable (slower)",
        addr, len, d->what(res));
    return;
  }
  d->pinned.emplace(addr, std::make_pair(len, r->ctx));
}

void unpin_range(std::uintptr_t addr, std::size_t len) noexcept {
  driver* d = drv_if_loaded();
  if (d == nullptr) return;
  std::lock_guard lk(d->mu);
  for (auto it = d->pinned.lower_bound(addr); it != d->pinned.end() && it->first - addr < len;) {
    ctx_scope cs(d, it->second.second);
    if (const CUresult res = d->host_unregister(reinterpret_cast<void*>(it->first));
        res != cuda_success)
      log::warn("UCX: cuMemHostUnregister({:#x}): {}", it->first, d->what(res));
    it = d->pinned.erase(it);
  }
}

}  // namespace gpu

status gpu_copy(std::span<const gpu_item> items) noexcept {
  driver* d = drv();
  if (d == nullptr) return status::backend;
  constexpr std::size_t max_streams = 8;
  std::pair<CUcontext, CUstream> used[max_streams];
  std::size_t nused = 0;
  status st = status::success;
  auto sync = [&](CUcontext c, CUstream s) {
    ctx_scope cs(d, c);
    if (const CUresult res = d->stream_sync(s); res != cuda_success) {
      log::error("UCX: DRAM <-> VRAM copy: cuStreamSynchronize: {}", d->what(res));
      st = status::backend;
    }
  };
  for (const gpu_item& it : items) {
    {
      ctx_scope cs(d, it.ctx);
      const CUresult res =
          cs.ok() ? d->memcpy_async(reinterpret_cast<CUdeviceptr>(it.dst),
                                    reinterpret_cast<CUdeviceptr>(it.src), it.len, it.stream)
                  : 201;  // CUDA_ERROR_INVALID_CONTEXT
      if (res != cuda_success) {
        log::error("UCX: DRAM <-> VRAM copy of {} bytes ({} -> {}): {}", it.len, it.src, it.dst,
                   d->what(res));
        st = status::backend;
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
