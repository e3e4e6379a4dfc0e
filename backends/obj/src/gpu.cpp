// VRAM staging of the object store backends (gpu.hpp) over the process's one CUDA driver
// (nixl/detail/cuda_driver.hpp: loaded at run time, so that the library builds and runs where
// there is no CUDA; VRAM registration then fails with a clear status).

#include "gpu.hpp"

#include <dlfcn.h>

#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <nixl/detail/cuda_driver.hpp>
#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::obj::detail {
namespace {

namespace cu = nixl::detail::cu;
constexpr std::size_t grain = 4096;

std::size_t round_up(std::size_t n) noexcept {
  return (n + grain - 1) / grain * grain;
}

/// The process's CUDA driver (loaded on the first VRAM registration) and, when it cannot stage
/// VRAM, why not.
struct staging_driver {
  cu::driver* d = nullptr;
  std::string why;
};

const staging_driver& driver() {
  static const staging_driver s = [] {
    staging_driver x;
    cu::driver& d = cu::get_driver();
    if (!d.why.empty()) {
      x.why = "VRAM needs " + d.why;
    } else if (const char* m =
                   d.lacks({"cuStreamQuery", "cuMemcpyDtoHAsync_v2", "cuMemcpyHtoDAsync_v2",
                            "cuMemHostAlloc", "cuMemFreeHost", "cuGetErrorName"})) {
      x.why = fmt::format("VRAM needs the CUDA driver (libcuda.so.1): libcuda.so.1 has no {}", m);
    } else {
      x.d = &d;
    }
    if (!x.why.empty()) log::debug("OBJ: {}", x.why);
    return x;
  }();
  return s;
}

}  // namespace

gpu_stage::gpu_stage(std::string_view who, std::size_t pool_bytes, std::size_t largest_body,
                     std::chrono::milliseconds copy_timeout)
    : who_(who),
      pool_bytes_(round_up(pool_bytes)),
      largest_(largest_body),
      copy_timeout_(copy_timeout) {}

gpu_stage::~gpu_stage() {
  if (pool_ == nullptr || drv_ == nullptr) return;
  cu::ctx_scope cs(*drv_, pool_ctx_);
  const cu::CUresult r = drv_->host_free(pool_);
  // At process exit the driver may have gone first (CUDA_ERROR_DEINITIALIZED): nothing to free.
  if (r != cu::success && r != cu::error_deinitialized)
    log::warn("{}: cuMemFreeHost: {}", who_, drv_->what(r));
}

int gpu_stage::attach(std::uintptr_t addr, std::size_t len, std::uint64_t dev_hint) {
  const staging_driver& sd = driver();
  if (sd.d == nullptr) raise(status::not_supported, "{} register_region: {}", who_, sd.why);
  cu::driver& d = *sd.d;
  if (round_up(largest_) > pool_bytes_)
    raise(status::invalid_param,
          "{} register_region: vram_staging_bytes ({}) is smaller than the largest HTTP body of a "
          "request ({} bytes: multipart_threshold and part_size); raise it or lower those",
          who_, pool_bytes_, largest_);
  if (addr == 0) raise(status::invalid_param, "{} register_region: VRAM at address 0", who_);
  std::string err;
  cu::device_res* h = d.device(d.clamp(dev_hint), err);
  if (h == nullptr) raise(status::backend, "{} register_region: {}", who_, err);
  int ordinal = -1;
  {
    cu::ctx_scope cs(d, h->ctx);
    if (cs.rc() != cu::success)
      raise(status::backend, "{} register_region: cuCtxPushCurrent: {}", who_, d.what(cs.rc()));
    const auto probe = [&](std::uintptr_t at) {
      unsigned type = 0;
      int dev = -1;
      cu::CUresult r =
          d.pointer_attr(&type, cu::attr_memory_type, static_cast<cu::CUdeviceptr>(at));
      if (r == cu::success)
        r = d.pointer_attr(&dev, cu::attr_device_ordinal, static_cast<cu::CUdeviceptr>(at));
      if (r != cu::success)
        raise(status::invalid_param,
              "{} register_region: VRAM {:#x}: not memory the CUDA driver knows "
              "(cuPointerGetAttribute: {})",
              who_, at, d.what(r));
      if (type == cu::memtype_host)
        raise(status::invalid_param,
              "{} register_region: {:#x} is host memory; register it as DRAM", who_, at);
      return dev;
    };
    ordinal = probe(addr);
    if (len > 1 && probe(addr + len - 1) != ordinal)
      raise(status::invalid_param,
            "{} register_region: VRAM [{:#x}, +{}) spans more than one device", who_, addr, len);
  }
  cu::device_res* r = d.device(ordinal, err);
  if (r == nullptr) raise(status::backend, "{} register_region: {}", who_, err);
  std::lock_guard lk(mu_);
  if (pool_ == nullptr) {
    cu::ctx_scope cs(d, r->ctx);
    if (cs.rc() != cu::success)
      raise(status::backend, "{} register_region: cuCtxPushCurrent: {}", who_, d.what(cs.rc()));
    void* p = nullptr;
    if (const cu::CUresult e = d.host_alloc(&p, pool_bytes_, cu::host_alloc_portable);
        e != cu::success)
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
    cu::driver* d = drv_;
    std::string why;
    cu::device_res* r = d != nullptr ? d->device(dev, why) : nullptr;
    if (r == nullptr) {
      err = fmt::format("{}: VRAM copy: {}", who_, d != nullptr ? why : "no CUDA driver");
      return false;
    }
    cu::ctx_scope cs(*d, r->ctx);
    if (cs.rc() != cu::success) {
      err = fmt::format("{}: cuCtxPushCurrent: {}", who_, d->what(cs.rc()));
      return false;
    }
    const char* name = down ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    const cu::CUresult e =
        down ? d->htod_async(reinterpret_cast<cu::CUdeviceptr>(dst), src, n, r->stream)
             : d->dtoh_async(dst, reinterpret_cast<cu::CUdeviceptr>(src), n, r->stream);
    if (e != cu::success) {
      err = fmt::format("{}: {} of {} bytes on device {}: {}", who_, name, n, dev, d->what(e));
      return false;
    }
    // A bounded wait: spin briefly, then sleep between polls.
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + copy_timeout_;
    for (unsigned i = 0;; ++i) {
      const cu::CUresult q = d->stream_query(r->stream);
      if (q == cu::success) return true;
      if (q != cu::error_not_ready) {
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
