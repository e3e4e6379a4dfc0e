#pragma once
/// The CUDA driver API, loaded once per process at run time (dlopen of libcuda.so.1: nothing
/// links against CUDA, so the library builds and runs where there is none), with one primary
/// context and one non-blocking copy stream per device. Every backend that calls the driver
/// (UCX's DRAM <-> VRAM copies, the object stores' VRAM staging, CUDA IPC mappings) goes through
/// this one table of entry points, so a fake of the same soname stands in for it in tests
/// (tests/support/fake_cuda). The driver's few types are declared here in its own names.

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <nixl/detail/log.hpp>

namespace nixl::detail::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUstream = void*;
using CUevent = void*;
struct CUuuid {
  char bytes[16];
};
struct CUipcMemHandle {
  char reserved[64];
};
struct CUipcEventHandle {
  char reserved[64];
};

inline constexpr CUresult success = 0;
inline constexpr CUresult error_deinitialized = 4;          // CUDA_ERROR_DEINITIALIZED
inline constexpr CUresult error_invalid_context = 201;      // CUDA_ERROR_INVALID_CONTEXT
inline constexpr CUresult error_not_ready = 600;            // CUDA_ERROR_NOT_READY
inline constexpr int attr_memory_type = 2;                  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr int attr_device_ordinal = 9;               // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
inline constexpr unsigned memtype_host = 1;                 // CU_MEMORYTYPE_HOST
inline constexpr unsigned host_alloc_portable = 1;          // CU_MEMHOSTALLOC_PORTABLE
inline constexpr unsigned host_register_portable = 1;       // CU_MEMHOSTREGISTER_PORTABLE
inline constexpr unsigned stream_non_blocking = 1;          // CU_STREAM_NON_BLOCKING
inline constexpr unsigned ipc_lazy_enable_peer_access = 1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
/// CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS: an event another process can open.
inline constexpr unsigned event_ipc_flags = 2 | 4;

/// The primary context and copy stream of one device (made on first use, kept for the
/// process: the driver tears them down at exit).
struct device_res {
  bool tried = false;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  std::string why;  ///< why there is none, when there is none
};

/// The loaded driver: its entry points, the devices, and why it is not usable (empty when it is).
/// The entry points beyond the base set (init, devices, primary contexts, streams, pointer
/// attributes, error strings) may be missing from an old driver or a fake: a user checks the ones
/// it needs with `lacks`.
struct driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_push)(CUcontext) = nullptr;
  CUresult (*ctx_pop)(CUcontext*) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*pointer_attr)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  // optional
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  CUresult (*stream_query)(CUstream) = nullptr;
  CUresult (*stream_sync)(CUstream) = nullptr;
  CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*dtoh_async)(void*, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*htod_async)(CUdeviceptr, const void*, std::size_t, CUstream) = nullptr;
  CUresult (*host_alloc)(void**, std::size_t, unsigned) = nullptr;
  CUresult (*host_free)(void*) = nullptr;
  CUresult (*host_register)(void*, std::size_t, unsigned) = nullptr;
  CUresult (*host_unregister)(void*) = nullptr;
  CUresult (*device_uuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*addr_range)(CUdeviceptr*, std::size_t*, CUdeviceptr) = nullptr;
  CUresult (*ipc_get)(CUipcMemHandle*, CUdeviceptr) = nullptr;
  CUresult (*ipc_open)(CUdeviceptr*, CUipcMemHandle, unsigned) = nullptr;
  CUresult (*ipc_close)(CUdeviceptr) = nullptr;
  CUresult (*ipc_event_get)(CUipcEventHandle*, CUevent) = nullptr;
  CUresult (*ipc_event_open)(CUevent*, CUipcEventHandle) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, std::size_t) = nullptr;  // device memory views
  CUresult (*mem_free)(CUdeviceptr) = nullptr;

  int devices = 0;
  /// What is missing when the driver is not usable ("the CUDA driver (libcuda.so.1), not
  /// found: ...", "a CUDA device: ..."), to follow "X needs "; empty when it is usable.
  std::string why;

  /// "CUDA_ERROR_X: text (code)".
  std::string what(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (error_name == nullptr || error_name(r, &name) != success) name = nullptr;
    if (error_string == nullptr || error_string(r, &text) != success) text = nullptr;
    if (name == nullptr) {  // a driver that cannot name its errors (the toolkit's stub)
      switch (r) {
        case 34:
          name = "CUDA_ERROR_STUB_LIBRARY";
          text = "libcuda.so.1 is the CUDA toolkit's stub, not a driver";
          break;
        case 35:
          name = "CUDA_ERROR_INSUFFICIENT_DRIVER";
          break;
        case 100:
          name = "CUDA_ERROR_NO_DEVICE";
          break;
        default:
          break;
      }
    }
    return fmt::format("{}: {} ({})", name != nullptr ? name : "CUDA error",
                       text != nullptr ? text : "unknown", r);
  }

  /// The first of `names` (entry points) this driver does not have, or null.
  const char* lacks(std::initializer_list<const char*> names) const noexcept {
    for (const char* n : names)
      for (const char* m : missing_)
        if (std::string_view(n) == m) return n;
    return nullptr;
  }

  /// Device `d`'s primary context and stream, or null with the reason in `err`.
  device_res* device(int d, std::string& err) {
    if (d < 0 || d >= devices) {
      err = fmt::format("CUDA device {} does not exist ({} present)", d, devices);
      return nullptr;
    }
    std::lock_guard lk(mu_);
    device_res& r = dev_[static_cast<std::size_t>(d)];
    if (!r.tried) {
      r.tried = true;
      CUdevice cd = 0;
      CUcontext c = nullptr;
      CUresult e = device_get(&cd, d);
      if (e == success) e = ctx_retain(&c, cd);
      if (e == success) e = ctx_push(c);
      if (e == success) {
        CUstream s = nullptr;
        e = stream_create(&s, stream_non_blocking);
        CUcontext popped = nullptr;
        (void)ctx_pop(&popped);
        if (e == success) {
          r.ctx = c;
          r.stream = s;
        }
      }
      if (e != success) {
        r.why = fmt::format("CUDA device {}: {}", d, what(e));
        log::warn("{}: no primary context or stream; nothing is copied on it", r.why);
      }
    }
    if (r.stream == nullptr) {
      err = r.why;
      return nullptr;
    }
    return &r;
  }
  device_res* device(int d) {
    std::string err;
    return device(d, err);
  }

  /// `hint` when it names a device, else device 0 (a region's device number may be anything).
  int clamp(std::uint64_t hint) const noexcept {
    return hint < static_cast<std::uint64_t>(devices) ? static_cast<int>(hint) : 0;
  }

  /// The ordinal of the device whose UUID is `uuid` (16 bytes), or -1 when it is not visible.
  int ordinal_of(const char* uuid) const noexcept {
    if (device_uuid == nullptr) return -1;
    for (int i = 0; i < devices; ++i) {
      CUdevice cd = 0;
      CUuuid u{};
      if (device_get(&cd, i) == success && device_uuid(&u, cd) == success &&
          std::string_view(u.bytes, 16) == std::string_view(uuid, 16))
        return i;
    }
    return -1;
  }

  /// Loads the driver (called once, by `get_driver`).
  void load() {
    lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = ::dlerror();
      why = fmt::format("the CUDA driver (libcuda.so.1), not found: {}",
                        e != nullptr ? e : "dlopen failed");
      return;
    }
    const bool ok =
        need(init, "cuInit") && need(device_count, "cuDeviceGetCount") &&
        need(device_get, "cuDeviceGet") && need(ctx_retain, "cuDevicePrimaryCtxRetain") &&
        need(ctx_push, "cuCtxPushCurrent_v2") && need(ctx_pop, "cuCtxPopCurrent_v2") &&
        need(stream_create, "cuStreamCreate") && need(pointer_attr, "cuPointerGetAttribute") &&
        need(error_string, "cuGetErrorString");
    if (!ok) {
      why = "the CUDA driver (libcuda.so.1): " + why;
      return;
    }
    want(error_name, "cuGetErrorName");
    want(stream_query, "cuStreamQuery");
    want(stream_sync, "cuStreamSynchronize");
    want(memcpy_async, "cuMemcpyAsync");
    want(event_create, "cuEventCreate");
    want(event_record, "cuEventRecord");
    want(event_query, "cuEventQuery");
    want(event_destroy, "cuEventDestroy_v2");
    want(dtoh_async, "cuMemcpyDtoHAsync_v2");
    want(htod_async, "cuMemcpyHtoDAsync_v2");
    want(host_alloc, "cuMemHostAlloc");
    want(host_free, "cuMemFreeHost");
    want(host_register, "cuMemHostRegister_v2");
    want(host_unregister, "cuMemHostUnregister");
    if (!want(device_uuid, "cuDeviceGetUuid_v2")) want(device_uuid, "cuDeviceGetUuid");
    want(addr_range, "cuMemGetAddressRange_v2");
    want(ipc_get, "cuIpcGetMemHandle");
    want(ipc_open, "cuIpcOpenMemHandle_v2");
    want(ipc_close, "cuIpcCloseMemHandle");
    want(ipc_event_get, "cuIpcGetEventHandle");
    want(ipc_event_open, "cuIpcOpenEventHandle");
    want(mem_alloc, "cuMemAlloc_v2");
    want(mem_free, "cuMemFree_v2");
    if (const CUresult r = init(0); r != success) {
      why = fmt::format("the CUDA driver (libcuda.so.1): cuInit: {}", what(r));
      return;
    }
    if (const CUresult r = device_count(&devices); r != success || devices <= 0) {
      why = r != success ? fmt::format("a CUDA device: cuDeviceGetCount: {}", what(r))
                         : std::string("a CUDA device: the driver sees none");
      devices = 0;
      return;
    }
    dev_ = std::make_unique<device_res[]>(static_cast<std::size_t>(devices));
  }

 private:
  template <class F>
  bool want(F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(lib, name));
    if (f == nullptr) missing_.push_back(name);
    return f != nullptr;
  }
  template <class F>
  bool need(F& f, const char* name) {
    if (want(f, name)) return true;
    if (why.empty()) why = fmt::format("libcuda.so.1 has no {}", name);
    return false;
  }

  std::vector<const char*> missing_;
  std::mutex mu_;
  std::unique_ptr<device_res[]> dev_;
};

namespace cuda_impl {
inline std::atomic<driver*>& loaded() noexcept {
  static std::atomic<driver*> p{nullptr};
  return p;
}
}  // namespace cuda_impl

/// The process's driver, loaded on the first call (its `why` says when it is not usable).
/// Throws only std::bad_alloc.
inline driver& get_driver() {
  static driver* d = [] {
    auto* x = new driver;  // kept for the process, as the contexts and streams are
    x->load();
    if (!x->why.empty()) log::debug("CUDA: not usable here: it needs {}", x->why);
    cuda_impl::loaded().store(x, std::memory_order_release);
    return x;
  }();
  return *d;
}

/// The driver when it is loaded and usable, else null; loads it on the first call.
inline driver* usable_driver() noexcept {
  try {
    driver& d = get_driver();
    return d.why.empty() ? &d : nullptr;
  } catch (...) {
    return nullptr;
  }
}

/// The driver when something loaded it already and it is usable (teardown must not load it).
inline driver* driver_if_loaded() noexcept {
  driver* d = cuda_impl::loaded().load(std::memory_order_acquire);
  return d != nullptr && d->why.empty() ? d : nullptr;
}

/// Makes a context current for the scope (cuCtxPushCurrent / cuCtxPopCurrent).
class ctx_scope {
 public:
  ctx_scope(const driver& d, CUcontext c) noexcept : d_(d), rc_(d.ctx_push(c)) {}
  ~ctx_scope() {
    CUcontext popped = nullptr;
    if (rc_ == success) (void)d_.ctx_pop(&popped);
  }
  ctx_scope(const ctx_scope&) = delete;
  ctx_scope& operator=(const ctx_scope&) = delete;
  bool ok() const noexcept { return rc_ == success; }
  CUresult rc() const noexcept { return rc_; }

 private:
  const driver& d_;
  CUresult rc_;
};

}  // namespace nixl::detail::cu
