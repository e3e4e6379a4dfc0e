// VRAM staging of the object store backends (gpu.hpp): the CUDA driver API through dlopen, so
// that the library builds and runs where there is no CUDA; VRAM registration then fails with a
// clear status.

#include "gpu.hpp"

#include <dlfcn.h>

#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::obj::detail {
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUstream = void*;
constexpr CUresult cuda_success = 0;
constexpr CUresult cuda_deinitialized = 4;  // CUDA_ERROR_DEINITIALIZED
constexpr CUresult cuda_not_ready = 600;    // CUDA_ERROR_NOT_READY
constexpr int attr_memory_type = 2;         // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int attr_device_ordinal = 9;      // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned memtype_host = 1;        // CU_MEMORYTYPE_HOST
constexpr unsigned host_alloc_portable = 1;
constexpr unsigned stream_non_blocking = 1;
constexpr std::size_t grain = 4096;

std::size_t round_up(std::size_t n) noexcept {
  return (n + grain - 1) / grain * grain;
}

}  // namespace

struct cuda_driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_push)(CUcontext) = nullptr;
  CUresult (*ctx_pop)(CUcontext*) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_query)(CUstream) = nullptr;
  CUresult (*dtoh_async)(void*, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*htod_async)(CUdeviceptr, const void*, std::size_t, CUstream) = nullptr;
  CUresult (*host_alloc)(void**, std::size_t, unsigned) = nullptr;
  CUresult (*host_free)(void*) = nullptr;
  CUresult (*pointer_attr)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;

  int devices = 0;
  std::string why;  // why it is not usable; empty when it is

  struct device_res {
    bool tried = false;
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
    std::string why;
  };
  std::mutex mu;
  std::unique_ptr<device_res[]> dev;

  /// "CUDA_ERROR_X: text (code)".
  std::string what(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (error_name == nullptr || error_name(r, &name) != cuda_success) name = nullptr;
    if (error_string == nullptr || error_string(r, &text) != cuda_success) text = nullptr;
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

  template <class F>
  bool sym(F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(lib, name));
    if (f == nullptr && why.empty()) why = fmt::format("libcuda.so.1 has no {}", name);
    return f != nullptr;
  }

  void load() {
    lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = ::dlerror();
      why = fmt::format("VRAM needs the CUDA driver (libcuda.so.1), not found: {}",
                        e != nullptr ? e : "dlopen failed");
      return;
    }
    const bool ok = sym(init, "cuInit") && sym(device_count, "cuDeviceGetCount") &&
                    sym(device_get, "cuDeviceGet") && sym(ctx_retain, "cuDevicePrimaryCtxRetain") &&
                    sym(ctx_push, "cuCtxPushCurrent_v2") && sym(ctx_pop, "cuCtxPopCurrent_v2") &&
                    sym(stream_create, "cuStreamCreate") && sym(stream_query, "cuStreamQuery") &&
                    sym(dtoh_async, "cuMemcpyDtoHAsync_v2") &&
                    sym(htod_async, "cuMemcpyHtoDAsync_v2") && sym(host_alloc, "cuMemHostAlloc") &&
                    sym(host_free, "cuMemFreeHost") && sym(pointer_attr, "cuPointerGetAttribute") &&
                    sym(error_string, "cuGetErrorString") && sym(error_name, "cuGetErrorName");
    if (!ok) {
      why = "VRAM needs the CUDA driver (libcuda.so.1): " + why;
      return;
    }
    if (const CUresult r = init(0); r != cuda_success) {
      why = fmt::format("VRAM needs the CUDA driver (libcuda.so.1): cuInit: {}", what(r));
      return;
    }
    if (const CUresult r = device_count(&devices); r != cuda_success || devices <= 0) {
      why = r != cuda_success
                ? fmt::format("VRAM needs a CUDA device: cuDeviceGetCount: {}", what(r))
                : std::string("VRAM needs a CUDA device: the driver sees none");
      devices = 0;
      return;
    }
    dev = std::make_unique<device_res[]>(static_cast<std::size_t>(devices));
  }

  /// Device `d`'s primary context and stream (made once; kept for the process, as the driver
  /// tears them down at exit), or null with the reason in `err`.
  device_res* device(int d, std::string& err) {
    if (d < 0 || d >= devices) {
      err = fmt::format("CUDA device {} does not exist ({} present)", d, devices);
      return nullptr;
    }
    std::lock_guard lk(mu);
    device_res& r = dev[static_cast<std::size_t>(d)];
    if (!r.tried) {
      r.tried = true;
      CUdevice cd = 0;
      CUcontext c = nullptr;
      CUresult e = device_get(&cd, d);
      if (e == cuda_success) e = ctx_retain(&c, cd);
      if (e == cuda_success) e = ctx_push(c);
      if (e == cuda_success) {
        CUstream s = nullptr;
        e = stream_create(&s, stream_non_blocking);
        CUcontext popped = nullptr;
        (void)ctx_pop(&popped);
        if (e == cuda_success) {
          r.ctx = c;
          r.stream = s;
        }
      }
      if (e != cuda_success) r.why = fmt::format("CUDA device {}: {}", d, what(e));
    }
    if (r.stream == nullptr) {
      err = r.why;
      return nullptr;
    }
    return &r;
  }
};

namespace {

cuda_driver& driver() {
  // Loaded once per process, on the first VRAM registration.
  static cuda_driver* d = [] {
    auto* x = new cuda_driver;
    x->load();
    if (!x->why.empty()) log::debug("OBJ: {}", x->why);
    return x;
  }();
  return *d;
}

/// Pushes a context for the scope.
class ctx_scope {
 public:
  ctx_scope(cuda_driver& d, CUcontext c) noexcept : d_(d), rc_(d.ctx_push(c)) {}
  ~ctx_scope() {
    CUcontext popped = nullptr;
    if (rc_ == cuda_success) (void)d_.ctx_pop(&popped);
  }
  ctx_scope(const ctx_scope&) = delete;
  ctx_scope& operator=(const ctx_scope&) = delete;
  CUresult rc() const noexcept { return rc_; }

 private:
  cuda_driver& d_;
  CUresult rc_;
};

}  // namespace

gpu_stage::gpu_stage(std::string_view who, std::size_t pool_bytes, std::size_t largest_body,
                     std::chrono::milliseconds copy_timeout)
    : who_(who),
      pool_bytes_(round_up(pool_bytes)),
      largest_(largest_body),
      copy_timeout_(copy_timeout) {}

gpu_stage::~gpu_stage() {
  if (pool_ == nullptr || drv_ == nullptr) return;
  ctx_scope cs(*drv_, pool_ctx_);
  const CUresult r = drv_->host_free(pool_);
  // At process exit the driver may have gone first (CUDA_ERROR_DEINITIALIZED): nothing to free.
  if (r != cuda_success && r != cuda_deinitialized)
    log::warn("{}: cuMemFreeHost: {}", who_, drv_->what(r));
}

int gpu_stage::attach(std::uintptr_t addr, std::size_t len, std::uint64_t dev_hint) {
  cuda_driver& d = driver();
  if (!d.why.empty()) raise(status::not_supported, "{} register_region: {}", who_, d.why);
  if (round_up(largest_) > pool_bytes_)
    raise(status::invalid_param,
          "{} register_region: vram_staging_bytes ({}) is smaller than the largest HTTP body of a "
          "request ({} bytes: multipart_threshold and part_size); raise it or lower those",
          who_, pool_bytes_, largest_);
  if (addr == 0) raise(status::invalid_param, "{} register_region: VRAM at address 0", who_);
  std::string err;
  const int hint =
      dev_hint < static_cast<std::uint64_t>(d.devices) ? static_cast<int>(dev_hint) : 0;
  cuda_driver::device_res* h = d.device(hint, err);
  if (h == nullptr) raise(status::backend, "{} register_region: {}", who_, err);
  int ordinal = -1;
  {
    ctx_scope cs(d, h->ctx);
    if (cs.rc() != cuda_success)
      raise(status::backend, "{} register_region: cuCtxPushCurrent: {}", who_, d.what(cs.rc()));
    const auto probe = [&](std::uintptr_t at) {
      unsigned type = 0;
      int dev = -1;
      CUresult r = d.pointer_attr(&type, attr_memory_type, static_cast<CUdeviceptr>(at));
      if (r == cuda_success)
        r = d.pointer_attr(&dev, attr_device_ordinal, static_cast<CUdeviceptr>(at));
      if (r != cuda_success)
        raise(status::invalid_param,
              "{} register_region: VRAM {:#x}: not memory the CUDA driver knows "
              "(cuPointerGetAttribute: {})",
              who_, at, d.what(r));
      if (type == memtype_host)
        raise(status::invalid_param,
              "{} register_region: {:#x} is host memory; register it as DRAM", who_, at);
      return dev;
    };
    ordinal = probe(addr);
    if (len > 1 && probe(addr + len - 1) != ordinal)
      raise(status::invalid_param,
            "{} register_region: VRAM [{:#x}, +{}) spans more than one device", who_, addr, len);
  }
  cuda_driver::device_res* r = d.device(ordinal, err);
  if (r == nullptr) raise(status::backend, "{} register_region: {}", who_, err);
  std::lock_guard lk(mu_);
  if (pool_ == nullptr) {
    ctx_scope cs(d, r->ctx);
    if (cs.rc() != cuda_success)
      raise(status::backend, "{} register_region: cuCtxPushCurrent: {}", who_, d.what(cs.rc()));
    void* p = nullptr;
    if (const CUresult e = d.host_alloc(&p, pool_bytes_, host_alloc_portable); e != cuda_success)
      raise(status::backend,
            "{} register_region: cuMemHostAlloc of the {}-byte VRAM staging pool "
            "(vram_staging_bytes): {}",
            who_, pool_bytes_, d.what(e));
    pool_ = static_cast<std::byte*>(p);
    pool_ctx_ = r->ctx;
    free_.clear();
    free_.emplace(0, pool_bytes_);
    drv_ = &d;
  }
  return ordinal;
}

std::byte* gpu_stage::acquire(std::size_t n) noexcept {
  n = round_up(n == 0 ? 1 : n);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < n) continue;
    const std::size_t at = it->first, left = it->second - n;
    free_.erase(it);
    if (left > 0) free_.emplace(at + n, left);
    in_use_ += n;
    return pool_ + at;
  }
  return nullptr;
}

void gpu_stage::release(std::byte* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  n = round_up(n == 0 ? 1 : n);
  in_use_ -= n;
  std::size_t at = static_cast<std::size_t>(p - pool_);
  try {
    auto next = free_.lower_bound(at);
    if (next != free_.end() && next->first == at + n) {  // joins the range after it
      n += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {  // and the one before it
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += n;
        return;
      }
    }
    free_.emplace_hint(next, at, n);
  } catch (...) {  // out of memory for a map node: those bytes stay out of the pool
  }
}

void gpu_stage::forget(std::size_t n) noexcept {
  n = round_up(n == 0 ? 1 : n);
  in_use_ -= n;
  lost_ += n;
}

bool gpu_stage::to_host(int dev, std::byte* host, const std::byte* gpu, std::size_t n,
                        std::string& err, bool& poisoned) noexcept {
  return copy(false, dev, host, gpu, n, err, poisoned);
}

bool gpu_stage::to_device(int dev, std::byte* gpu, const std::byte* host, std::size_t n,
                          std::string& err, bool& poisoned) noexcept {
  return copy(true, dev, gpu, host, n, err, poisoned);
}

bool gpu_stage::copy(bool down, int dev, void* dst, const void* src, std::size_t n,
                     std::string& err, bool& poisoned) noexcept {
  poisoned = false;
  if (n == 0) return true;
  try {
    cuda_driver* d = drv_;
    std::string why;
    cuda_driver::device_res* r = d != nullptr ? d->device(dev, why) : nullptr;
    if (r == nullptr) {
      err = fmt::format("{}: VRAM copy: {}", who_, d != nullptr ? why : "no CUDA driver");
      return false;
    }
    ctx_scope cs(*d, r->ctx);
    if (cs.rc() != cuda_success) {
      err = fmt::format("{}: cuCtxPushCurrent: {}", who_, d->what(cs.rc()));
      return false;
    }
    const char* name = down ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    const CUresult e = down ? d->htod_async(reinterpret_cast<CUdeviceptr>(dst), src, n, r->stream)
                            : d->dtoh_async(dst, reinterpret_cast<CUdeviceptr>(src), n, r->stream);
    if (e != cuda_success) {
      err = fmt::format("{}: {} of {} bytes on device {}: {}", who_, name, n, dev, d->what(e));
      return false;
    }
    // A bounded wait: spin briefly, then sleep between polls.
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + copy_timeout_;
    for (unsigned i = 0;; ++i) {
      const CUresult q = d->stream_query(r->stream);
      if (q == cuda_success) return true;
      if (q != cuda_not_ready) {
        err = fmt::format("{}: {} of {} bytes on device {}: {}", who_, name, n, dev, d->what(q));
        poisoned = true;  // the copy's state is unknown
        return false;
      }
      if (std::chrono::steady_clock::now() >= end) {
        err = fmt::format(
            "{}: {} of {} bytes on device {} did not end within {} ms "
            "(request_timeout_ms)",
            who_, name, n, dev, copy_timeout_.count());
        poisoned = true;
        return false;
      }
      if (i < 200)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  } catch (const std::exception& x) {
    err = fmt::format("{}: VRAM copy: {}", who_, x.what());
    return false;
  }
}

}  // namespace nixl::obj::detail
