#pragma once
/// The process's memory views in GPU memory (nixl/device/abi.hpp): written once by the host,
/// read by kernels. A released view's header is marked released and kept (its memory is freed
/// only after `kept_released` later releases), so that a kernel launched with a released handle
/// reads "released" and returns an error instead of reading freed memory.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/detail/cuda_driver.hpp>
#include <nixl/detail/memory.hpp>
#include <nixl/detail/region_pin.hpp>
#include <nixl/detail/status.hpp>
#include <nixl/device/abi.hpp>

namespace nixl::detail::views {

using namespace nixl::detail::cu;  // NOLINT: the driver table's names

class device_store {
 public:
  /// How many released views keep their header readable before their memory is freed.
  static constexpr std::size_t kept_released = 1024;

  static device_store& get() {
    static device_store* s = new device_store;  // views may be released at exit
    return *s;
  }

  /// Copies a view to new memory of `device`; returns its handle (the header's address).
  /// Throws `nixl::error`: not_supported without a usable driver, backend when CUDA fails.
  void* upload(int device, std::uint32_t side, mem_kind kind,
               std::span<const device::abi::entry> entries) {
    driver* d = usable_driver();
    if (d == nullptr)
      raise(status::not_supported, "memory views need the CUDA driver: {}", get_driver().why);
    if (const char* m = d->lacks(
            {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize"}))
      raise(status::not_supported, "memory views: libcuda.so.1 has no {}", m);
    std::string err;
    device_res* r = d->device(device, err);
    if (r == nullptr) raise(status::backend, "memory view: {}", err);
    std::vector<unsigned char> bytes(sizeof(device::abi::header) +
                                     entries.size() * sizeof(device::abi::entry));
    device::abi::header h{device::abi::magic,
                          device::abi::state_live,
                          entries.size(),
                          side,
                          static_cast<std::uint32_t>(kind),
                          0};
    std::memcpy(bytes.data(), &h, sizeof h);
    if (!entries.empty())
      std::memcpy(bytes.data() + sizeof h, entries.data(), entries.size_bytes());
    ctx_scope cs(*d, r->ctx);
    if (!cs.ok()) raise(status::backend, "memory view: cuCtxPushCurrent: {}", d->what(cs.rc()));
    CUdeviceptr p = 0;
    if (const CUresult e = d->mem_alloc(&p, bytes.size()); e != success)
      raise(status::backend, "memory view: cuMemAlloc of {} bytes: {}", bytes.size(), d->what(e));
    CUresult e = d->htod_async(p, bytes.data(), bytes.size(), r->stream);
    if (e == success) e = d->stream_sync(r->stream);
    if (e != success) {
      (void)d->mem_free(p);
      raise(status::backend, "memory view: copy to the GPU: {}", d->what(e));
    }
    std::lock_guard lk(mu_);
    live_.push_back({reinterpret_cast<void*>(p), r});
    return reinterpret_cast<void*>(p);
  }

  /// Marks `h` released (kernels that read it now get an error) and frees the memory of the
  /// view released `kept_released` releases ago. False when `h` is not a live view.
  bool release(void* h) noexcept {
    std::lock_guard lk(mu_);
    std::size_t i = 0;
    while (i < live_.size() && live_[i].handle != h) ++i;
    if (i == live_.size()) return false;
    const held v = live_[i];
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    driver* d = driver_if_loaded();
    if (d == nullptr) return true;
    ctx_scope cs(*d, v.res->ctx);
    static const std::uint32_t released = device::abi::state_released;
    const auto state =
        reinterpret_cast<CUdeviceptr>(v.handle) + offsetof(device::abi::header, state);
    if (d->htod_async(state, &released, sizeof released, v.res->stream) == success)
      (void)d->stream_sync(v.res->stream);
    released_.push_back(v);
    if (released_.size() > kept_released) {
      const held old = released_.front();
      released_.pop_front();
      ctx_scope c2(*d, old.res->ctx);
      (void)d->mem_free(reinterpret_cast<CUdeviceptr>(old.handle));
    }
    return true;
  }

  /// Views not released yet (for tests).
  std::size_t live() const {
    std::lock_guard lk(mu_);
    return live_.size();
  }

 private:
  struct held {
    void* handle;
    device_res* res;
  };
  device_store() = default;
  mutable std::mutex mu_;
  std::vector<held> live_;
  std::deque<held> released_;
};

/// What an agent keeps for a view it handed out: the device copy (released with the record),
/// the regions it points into (kept registered until then, as prepared lists do), the peers and
/// CUDA IPC mappings it reaches them through.
struct record {
  void* handle = nullptr;
  std::vector<region_pin> pins;
  std::vector<std::shared_ptr<const void>> peers;
  std::vector<std::shared_ptr<const void>> keep;

  record() = default;
  record(record&& o) noexcept
      : handle(std::exchange(o.handle, nullptr)),
        pins(std::move(o.pins)),
        peers(std::move(o.peers)),
        keep(std::move(o.keep)) {}
  record& operator=(record&&) = delete;
  ~record() {
    if (handle != nullptr) (void)device_store::get().release(handle);
  }
};

}  // namespace nixl::detail::views

namespace nixl {

/// NIXL's placeholder agent name: a remote list's entry of this agent keeps its index and
/// points nowhere (nixlGetPtr gives null, a put to it is an error).
inline constexpr std::string_view null_agent = "NULL_AGENT";

/// One entry of a remote view: a peer's name (or `null_agent`) and a range of its memory.
struct remote_entry {
  std::string agent;
  desc range;
};

/// How `agent::prepare_view` resolves a list.
struct view_options {
  std::vector<std::string> backends;  ///< candidates, by name; empty: every backend
  std::string custom;                 ///< NIXL's customParam (`worker_id=N` is accepted)
  /// Local views: entry i points at the start of the registration that covers it (NIXL's
  /// behaviour, the compat layer's choice) instead of the entry's own address.
  bool registration_base = false;
  int device = -1;  ///< remote views: the GPU holding the view; -1: the first entry's
};

}  // namespace nixl
