#pragma once
// What the source files of the UCX backend share and users do not see (not installed).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nixl/backends/ucx.hpp>

namespace nixl::ucx::detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Backends of this process, by id: agents of one process watch each other through it.
struct local_registry {
  std::mutex mu;
  std::unordered_map<std::uint64_t, std::weak_ptr<std::atomic<bool>>> live;
  static local_registry& get() {
    static local_registry r;
    return r;
  }
};

/// UCX's configuration (environment and defaults) with the backend's parameters applied:
/// `device_list`, `engine_config`, and the defaults this backend chooses. Throws
/// `nixl::error(invalid_param)` naming a setting UCX rejects.
config_handle read_ucp_config(const config& cfg);

/// An eager active message `id` carrying `*buf` on `ep`. While UCX still holds the bytes,
/// `buf` is handed over (freed when the send completes) and the answer is true: the caller
/// kicks the worker. `st` is the send's error, UCS_OK when it was taken or done at once.
bool send_owned(ucp_ep_h ep, unsigned id, std::unique_ptr<std::string>& buf,
                ucs_status_t& st) noexcept;

}  // namespace nixl::ucx::detail

namespace nixl::ucx::detail::gpu {

/// The context and copy stream of the device that holds `vram` (an address valid in this
/// process), or nothing when the CUDA driver is not there or does not know the address.
/// `dev_hint`: the device to ask through (the region's device number).
struct located {
  void* ctx = nullptr;
  void* stream = nullptr;
};
std::optional<located> locate(const void* vram, std::uint64_t dev_hint) noexcept;

/// The address in this process of a peer's VRAM at `raddr` (same host, another process),
/// mapped through UCX's cuda_ipc key in `rkey`; null when UCX cannot map it.
void* map_remote(ucp_rkey_h rkey, std::uint64_t raddr, std::uint64_t dev_hint) noexcept;

/// The CUDA IPC export of the allocation holding [addr, addr+len), VRAM of this process; nothing
/// when the driver is absent or the allocation cannot be exported (e.g. cuMemCreate memory).
std::optional<ipc_export> export_vram(std::uintptr_t addr, std::size_t len,
                                      std::uint64_t dev_hint) noexcept;
/// The peer allocation of `x` opened here, on the device of this host with its UUID (the
/// process's one mapping of it, closed when the last holder drops it; with a `keeper`, kept open
/// while idle until the keeper closes its idle ones); null when the device is not visible here
/// or the driver refuses the handle.
std::shared_ptr<ipc_mapping> open_ipc(const ipc_export& x, const void* keeper = nullptr) noexcept;
/// Where an opened allocation starts in this process, and the context and copy stream of its
/// device.
struct mapped {
  char* base = nullptr;
  located loc;
  std::size_t size = 0;  ///< of the allocation as mapped here (0: unknown)
};
mapped where(const ipc_mapping& m) noexcept;

/// Pins [addr, addr+len) with cuMemHostRegister unless CUDA knows it already (or it lies in
/// a range pinned here); kept until `unpin_range` covers it. Failure leaves it pageable.
void pin(std::uintptr_t addr, std::size_t len, std::uint64_t dev_hint) noexcept;
/// Unpins the ranges `pin` pinned that start inside [addr, addr+len).
void unpin_range(std::uintptr_t addr, std::size_t len) noexcept;

}  // namespace nixl::ucx::detail::gpu
