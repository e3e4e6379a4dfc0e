#pragma once
/// The process's one table of CUDA IPC mappings of peers' GPU memory, shared by every backend.
///
/// cuIpcOpenMemHandle maps a whole allocation, and a process may open a handle only once per
/// device: several regions of a peer (tensors of one caching-allocator segment), several
/// backends and several agents of this process share one mapping per (handle, device). It is
/// opened on its first use and closed with its last user. A user that serves many short uses
/// (a copy request each) names itself as the mapping's keeper: the mapping then stays open while
/// idle, until the keeper lets go (`close_idle`) or more than `max_idle` mappings are idle (the
/// one idle longest is closed first; a later use opens it again).

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include <nixl/detail/cuda_driver.hpp>
#include <nixl/detail/log.hpp>

namespace nixl::detail::cu {

/// A CUDA IPC memory handle (CUipcMemHandle's 64 bytes).
using ipc_handle = std::array<char, 64>;

/// VRAM of this process exported for another process of this host: the IPC handle of the
/// allocation holding the region, its device's UUID, and where the region lies in it.
struct ipc_export {
  ipc_handle handle{};
  std::array<char, 16> uuid{};
  std::uint64_t offset = 0;     ///< of the region's first byte in the allocation
  std::uint64_t alloc_len = 0;  ///< of the allocation
};

/// The export of the allocation holding [addr, addr+len), VRAM of this process, or nothing with
/// the reason in `err` (no driver, not GPU memory, memory that cannot be exported such as
/// cuMemCreate allocations). `dev_hint`: the device to ask through (the region's device number).
inline std::optional<ipc_export> export_ipc(std::uintptr_t addr, std::size_t len,
                                            std::uint64_t dev_hint, std::string& err) {
  driver* d = usable_driver();
  if (d == nullptr) {
    err = "CUDA IPC needs " + get_driver().why;
    return std::nullopt;
  }
  if (const char* m = d->lacks({"cuDeviceGetUuid", "cuMemGetAddressRange_v2", "cuIpcGetMemHandle",
                                "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle"});
      m != nullptr || d->device_uuid == nullptr) {
    err = fmt::format("libcuda.so.1 has no {}", m != nullptr ? m : "cuDeviceGetUuid");
    return std::nullopt;
  }
  if (addr == 0) {
    err = "VRAM at address 0";
    return std::nullopt;
  }
  device_res* hint = d->device(d->clamp(dev_hint), err);
  if (hint == nullptr) return std::nullopt;
  int ordinal = -1;
  {
    ctx_scope cs(*d, hint->ctx);
    CUresult r = cs.rc();
    if (r == success)
      r = d->pointer_attr(&ordinal, attr_device_ordinal, static_cast<CUdeviceptr>(addr));
    if (r != success) {
      err = fmt::format("cuPointerGetAttribute: {}", d->what(r));
      return std::nullopt;
    }
  }
  device_res* r = d->device(ordinal, err);
  if (r == nullptr) return std::nullopt;
  CUdevice cd = 0;
  CUuuid u{};
  if (const CUresult e = d->device_get(&cd, ordinal) == success ? d->device_uuid(&u, cd) : 1;
      e != success) {
    err = fmt::format("cuDeviceGetUuid: {}", d->what(e));
    return std::nullopt;
  }
  ctx_scope cs(*d, r->ctx);
  if (!cs.ok()) {
    err = fmt::format("cuCtxPushCurrent: {}", d->what(cs.rc()));
    return std::nullopt;
  }
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (const CUresult e = d->addr_range(&base, &size, static_cast<CUdeviceptr>(addr));
      e != success || addr < base || addr - base > size || len > size - (addr - base)) {
    err = fmt::format("no allocation range ({})", e != success ? d->what(e) : "region outside it");
    return std::nullopt;
  }
  CUipcMemHandle h{};
  if (const CUresult e = d->ipc_get(&h, base); e != success) {
    err = fmt::format("cuIpcGetMemHandle: {}", d->what(e));
    return std::nullopt;
  }
  ipc_export x;
  std::memcpy(x.handle.data(), h.reserved, x.handle.size());
  std::memcpy(x.uuid.data(), u.bytes, x.uuid.size());
  x.offset = addr - base;
  x.alloc_len = size;
  return x;
}

/// A peer allocation opened in this process.
struct ipc_view {
  char* base = nullptr;     ///< where the allocation starts here
  std::size_t size = 0;     ///< of the allocation as mapped here (0: unknown)
  int device = -1;          ///< the device it is mapped on
  CUcontext ctx = nullptr;  ///< that device's primary context and copy stream
  CUstream stream = nullptr;
};

class ipc_table {
 public:
  /// How many idle mappings kept by keepers stay open at most.
  static constexpr std::size_t max_idle = 4096;

  /// The process's table.
  static ipc_table& get() {
    static ipc_table* t = new ipc_table;  // used by destructors until the process ends
    return *t;
  }

  /// The mapping of `h` on `device`, opened now unless it is open already; nothing with the
  /// reason in `err` when the driver is absent or refuses the handle. Each success is one use,
  /// ended by `release` (or `release_base`). `keeper`: see the file's comment.
  std::optional<ipc_view> acquire(const ipc_handle& h, int device, std::string& err,
                                  const void* keeper = nullptr) {
    driver* d = usable_driver();
    if (d == nullptr) {
      err = "CUDA IPC needs " + get_driver().why;
      return std::nullopt;
    }
    if (const char* m = d->lacks({"cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle"})) {
      err = fmt::format("libcuda.so.1 has no {}", m);
      return std::nullopt;
    }
    device_res* r = d->device(device, err);
    if (r == nullptr) return std::nullopt;
    std::lock_guard lk(mu_);
    const key k{h, device};
    auto it = open_.find(k);
    if (it == open_.end()) {
      ctx_scope cs(*d, r->ctx);
      if (!cs.ok()) {
        err = fmt::format("cuCtxPushCurrent: {}", d->what(cs.rc()));
        return std::nullopt;
      }
      CUipcMemHandle ch{};
      std::memcpy(ch.reserved, h.data(), h.size());
      CUdeviceptr base = 0;
      if (const CUresult e = d->ipc_open(&base, ch, ipc_lazy_enable_peer_access); e != success) {
        err = fmt::format("cuIpcOpenMemHandle: {}", d->what(e));
        return std::nullopt;
      }
      CUdeviceptr b = 0;
      std::size_t size = 0;
      if (d->addr_range == nullptr || d->addr_range(&b, &size, base) != success || b != base)
        size = 0;
      entry e;
      e.view = {reinterpret_cast<char*>(base), size, device, r->ctx, r->stream};
      it = open_.emplace(k, e).first;
      by_base_.emplace(base, k);
      ++opened_;
    } else if (it->second.holders == 0) {
      --idle_;
    }
    ++it->second.holders;
    if (keeper != nullptr) it->second.keeper = keeper;
    return it->second.view;
  }

  /// Ends one use of `h` on `device`.
  void release(const ipc_handle& h, int device) noexcept {
    std::lock_guard lk(mu_);
    if (auto it = open_.find(key{h, device}); it != open_.end()) drop(it);
  }

  /// Ends one use of the mapping that starts at `base`.
  void release_base(const void* base) noexcept {
    std::lock_guard lk(mu_);
    auto b = by_base_.find(reinterpret_cast<CUdeviceptr>(base));
    if (b == by_base_.end()) return;
    if (auto it = open_.find(b->second); it != open_.end()) drop(it);
  }

  /// Closes the idle mappings `keeper` kept; those in use close with their last user.
  void close_idle(const void* keeper) noexcept {
    std::lock_guard lk(mu_);
    for (auto it = open_.begin(); it != open_.end();) {
      auto next = std::next(it);
      if (it->second.keeper == keeper) {
        it->second.keeper = nullptr;
        if (it->second.holders == 0) {
          --idle_;
          close(it);
        }
      }
      it = next;
    }
  }

  /// Mappings open now, and opened since the process started (for tests and diagnostics).
  std::size_t open_now() const {
    std::lock_guard lk(mu_);
    return open_.size();
  }
  std::size_t opened_total() const {
    std::lock_guard lk(mu_);
    return opened_;
  }

 private:
  using key = std::pair<ipc_handle, int>;
  struct entry {
    ipc_view view;
    std::size_t holders = 0;
    const void* keeper = nullptr;
    std::uint64_t idle_since = 0;  ///< the table's clock when it became idle
  };
  using iterator = std::map<key, entry>::iterator;

  ipc_table() = default;

  void drop(iterator it) noexcept {
    if (it->second.holders == 0 || --it->second.holders != 0) return;
    if (it->second.keeper == nullptr) return close(it);
    it->second.idle_since = ++clock_;
    if (++idle_ <= max_idle) return;
    auto oldest = open_.end();  // more idle than allowed: close the one idle longest
    for (auto j = open_.begin(); j != open_.end(); ++j)
      if (j->second.holders == 0 && j->second.keeper != nullptr &&
          (oldest == open_.end() || j->second.idle_since < oldest->second.idle_since))
        oldest = j;
    --idle_;
    close(oldest);
  }

  void close(iterator it) noexcept {
    if (driver* d = driver_if_loaded(); d != nullptr) {
      ctx_scope cs(*d, it->second.view.ctx);
      if (const CUresult r = d->ipc_close(reinterpret_cast<CUdeviceptr>(it->second.view.base));
          r != success) {
        try {
          log::warn("CUDA: cuIpcCloseMemHandle of a peer's VRAM: {}", d->what(r));
        } catch (...) {
        }
      }
    }
    by_base_.erase(reinterpret_cast<CUdeviceptr>(it->second.view.base));
    open_.erase(it);
  }

  mutable std::mutex mu_;
  std::map<key, entry> open_;
  std::map<CUdeviceptr, key> by_base_;
  std::size_t idle_ = 0;  ///< open, kept by a keeper, with no use now
  std::uint64_t clock_ = 0;
  std::size_t opened_ = 0;
};

/// One use of a mapping, ended when the last owner of the shared pointer drops it.
class ipc_lease {
 public:
  ipc_lease(const ipc_handle& h, const ipc_view& v) noexcept : handle_(h), view_(v) {}
  ~ipc_lease() { ipc_table::get().release(handle_, view_.device); }
  ipc_lease(const ipc_lease&) = delete;
  ipc_lease& operator=(const ipc_lease&) = delete;
  const ipc_view& view() const noexcept { return view_; }

 private:
  ipc_handle handle_;
  ipc_view view_;
};

/// `ipc_table::acquire` as a shared lease; null with the reason in `err`.
inline std::shared_ptr<ipc_lease> open_ipc(const ipc_handle& h, int device, std::string& err,
                                           const void* keeper = nullptr) {
  ipc_table& t = ipc_table::get();
  const auto v = t.acquire(h, device, err, keeper);
  if (!v) return nullptr;
  try {
    return std::make_shared<ipc_lease>(h, *v);
  } catch (...) {
    t.release(h, device);
    throw;
  }
}

}  // namespace nixl::detail::cu
