// The one stand-in for the CUDA driver (libcuda.so.1) of every backend's tests, for the driver
// calls of nixl/detail/cuda_driver.hpp where there is no GPU (target nixl_fake_cuda; a test
// dlopens it by its path, NIXL_FAKE_CUDA, before any backend looks for the driver):
// - one device (UUID "fake-cuda-gpu-0\0"); "device memory" is host memory this library handed
//   out (cuMemAlloc_v2), so the test reads and writes it directly;
// - the object stores' staging: asynchronous copies are memcpy done late (a stream answers
//   CUDA_ERROR_NOT_READY a few times first, then copies); a test can make the next copy fail or
//   never end (fake_cuda_fail_next) and count the copies (fake_cuda_copies);
// - UCX's copies: cuMemcpyAsync copies at once, cuStreamSynchronize ends what was queued,
//   cuMemHostRegister / cuMemHostUnregister are counted (fake_cuda_host_registered);
// - CUDA IPC: a handle names a fake allocation; opening it maps it "again" at the same address
//   (one process), and the opens and closes are counted (fake_cuda_ipc_opens / _open_now).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace {

using CUresult = int;
constexpr CUresult ok = 0, invalid_value = 1, already_mapped = 208, not_ready = 600,
                   launch_failed = 719;
struct uuid16 {
  char bytes[16];
};
struct ipc_handle64 {
  char reserved[64];
};

struct pending {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t n = 0;
  int polls = 0;
};

std::mutex mu;
std::map<std::uintptr_t, std::size_t> device_mem, host_mem;  // start -> length
std::map<std::uintptr_t, std::size_t> registered;            // cuMemHostRegister'd
std::set<unsigned long long> ipc_open_now;                   // allocations opened through IPC
long ipc_opens = 0;
pending queued;
bool busy = false;
int fail_next = 0;  // 1: the next copy fails to start; 2: it fails on query; 3: it never ends
long copies = 0;
int stream_token = 0, ctx_token = 0;

bool inside(const std::map<std::uintptr_t, std::size_t>& m, std::uintptr_t p) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  return p < it->first + it->second;
}

/// Queues a copy between device address `gpu` and host address `host` (pinned by cuMemHostAlloc).
CUresult start_copy(void* dst, const void* src, std::size_t n, std::uintptr_t gpu,
                    std::uintptr_t host) {
  std::lock_guard l(mu);
  if (!inside(device_mem, gpu) || !inside(host_mem, host)) return invalid_value;
  if (fail_next == 1) {
    fail_next = 0;
    return launch_failed;
  }
  queued = {dst, src, n, 0};
  busy = true;
  ++copies;
  return ok;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuInit(unsigned) {
  return ok;
}
__attribute__((visibility("default"))) CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuDeviceGet(int* d, int i) {
  if (i != 0) return invalid_value;
  *d = 0;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuDevicePrimaryCtxRetain(void** c, int) {
  *c = &ctx_token;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuCtxPushCurrent_v2(void* c) {
  return c == &ctx_token ? ok : invalid_value;
}
__attribute__((visibility("default"))) CUresult cuCtxPopCurrent_v2(void** c) {
  if (c != nullptr) *c = &ctx_token;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuStreamCreate(void** s, unsigned) {
  *s = &stream_token;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuStreamQuery(void*) {
  std::lock_guard l(mu);
  if (!busy) return ok;
  if (fail_next == 3) return not_ready;  // never ends (the test clears it)
  if (fail_next == 2) {
    fail_next = 0;
    busy = false;
    return launch_failed;
  }
  if (++queued.polls < 3) return not_ready;
  std::memcpy(queued.dst, queued.src, queued.n);
  busy = false;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemcpyDtoHAsync_v2(void* dst,
                                                                     unsigned long long src,
                                                                     std::size_t n, void*) {
  return start_copy(dst, reinterpret_cast<const void*>(src), n, src,
                    reinterpret_cast<std::uintptr_t>(dst));
}
__attribute__((visibility("default"))) CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst,
                                                                     const void* src, std::size_t n,
                                                                     void*) {
  return start_copy(reinterpret_cast<void*>(dst), src, n, dst,
                    reinterpret_cast<std::uintptr_t>(src));
}
__attribute__((visibility("default"))) CUresult cuMemHostAlloc(void** p, std::size_t n, unsigned) {
  *p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (*p == nullptr) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  std::lock_guard l(mu);
  host_mem[reinterpret_cast<std::uintptr_t>(*p)] = n;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemFreeHost(void* p) {
  std::lock_guard l(mu);
  host_mem.erase(reinterpret_cast<std::uintptr_t>(p));
  std::free(p);
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(unsigned long long* p,
                                                              std::size_t n) {
  void* m = std::malloc(n == 0 ? 1 : n);
  if (m == nullptr) return 2;
  std::lock_guard l(mu);
  *p = reinterpret_cast<std::uintptr_t>(m);
  device_mem[*p] = n;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemFree_v2(unsigned long long p) {
  std::lock_guard l(mu);
  device_mem.erase(p);
  std::free(reinterpret_cast<void*>(p));
  return ok;
}
__attribute__((visibility("default"))) CUresult cuPointerGetAttribute(void* out, int attr,
                                                                      unsigned long long p) {
  std::lock_guard l(mu);
  const bool dev = inside(device_mem, p), host = inside(host_mem, p);
  if (!dev && !host) return invalid_value;
  if (attr == 2) {  // memory type
    *static_cast<unsigned*>(out) = dev ? 2u : 1u;
    return ok;
  }
  if (attr == 9) {  // device ordinal
    *static_cast<int*>(out) = 0;
    return ok;
  }
  return invalid_value;
}
__attribute__((visibility("default"))) CUresult cuGetErrorString(CUresult r, const char** s) {
  *s = r == launch_failed ? "unspecified launch failure (fake)" : "fake CUDA error";
  return ok;
}
__attribute__((visibility("default"))) CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = r == launch_failed ? "CUDA_ERROR_LAUNCH_FAILED" : "CUDA_ERROR_FAKE";
  return ok;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetUuid_v2(uuid16* u, int d) {
  if (d != 0) return invalid_value;
  std::memcpy(u->bytes, "fake-cuda-gpu-0", 16);
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemGetAddressRange_v2(unsigned long long* base,
                                                                        std::size_t* size,
                                                                        unsigned long long p) {
  std::lock_guard l(mu);
  auto it = device_mem.upper_bound(p);
  if (it == device_mem.begin()) return invalid_value;
  --it;
  if (p >= it->first + it->second) return invalid_value;
  if (base != nullptr) *base = it->first;
  if (size != nullptr) *size = it->second;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuIpcGetMemHandle(ipc_handle64* h,
                                                                  unsigned long long p) {
  std::lock_guard l(mu);
  if (device_mem.find(p) == device_mem.end()) return invalid_value;  // an allocation's start
  std::memset(h->reserved, 0, sizeof h->reserved);
  std::memcpy(h->reserved, "fakeipc", 8);
  std::memcpy(h->reserved + 8, &p, sizeof p);
  return ok;
}
__attribute__((visibility("default"))) CUresult cuIpcOpenMemHandle_v2(unsigned long long* p,
                                                                      ipc_handle64 h, unsigned) {
  std::lock_guard l(mu);
  unsigned long long at = 0;
  std::memcpy(&at, h.reserved + 8, sizeof at);
  if (std::memcmp(h.reserved, "fakeipc", 8) != 0 || device_mem.find(at) == device_mem.end())
    return invalid_value;
  if (ipc_open_now.count(at) != 0) return already_mapped;  // once per process and device
  ipc_open_now.insert(at);
  ++ipc_opens;
  *p = at;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuIpcCloseMemHandle(unsigned long long p) {
  std::lock_guard l(mu);
  return ipc_open_now.erase(p) != 0 ? ok : invalid_value;
}
__attribute__((visibility("default"))) CUresult cuMemcpyAsync(unsigned long long dst,
                                                              unsigned long long src, std::size_t n,
                                                              void*) {
  {
    std::lock_guard l(mu);
    if (!inside(device_mem, dst) && !inside(device_mem, src)) return invalid_value;
    ++copies;
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return ok;
}
__attribute__((visibility("default"))) CUresult cuStreamSynchronize(void*) {
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemHostRegister_v2(void* p, std::size_t n,
                                                                     unsigned) {
  std::lock_guard l(mu);
  registered[reinterpret_cast<std::uintptr_t>(p)] = n;
  return ok;
}
__attribute__((visibility("default"))) CUresult cuMemHostUnregister(void* p) {
  std::lock_guard l(mu);
  return registered.erase(reinterpret_cast<std::uintptr_t>(p)) != 0 ? ok : invalid_value;
}

// Test controls.
__attribute__((visibility("default"))) void fake_cuda_fail_next(int how) {
  std::lock_guard l(mu);
  fail_next = how;
}
__attribute__((visibility("default"))) long fake_cuda_copies() {
  std::lock_guard l(mu);
  return copies;
}
__attribute__((visibility("default"))) long fake_cuda_ipc_opens() {
  std::lock_guard l(mu);
  return ipc_opens;
}
__attribute__((visibility("default"))) long fake_cuda_ipc_open_now() {
  std::lock_guard l(mu);
  return static_cast<long>(ipc_open_now.size());
}
__attribute__((visibility("default"))) long fake_cuda_host_registered() {
  std::lock_guard l(mu);
  return static_cast<long>(registered.size());
}
__attribute__((visibility("default"))) std::size_t fake_cuda_host_bytes() {
  std::lock_guard l(mu);
  std::size_t n = 0;
  for (const auto& [a, len] : host_mem) n += len;
  return n;
}

}  // extern "C"
