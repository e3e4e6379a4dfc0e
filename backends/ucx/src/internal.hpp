#pragma once
// What the source files of the UCX backend share and users do not see (not installed).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

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

/// Copies a backend runs for its peers on this host (copy requests, copies.cpp). The driver
/// copies run on while the worker goes on serving; the answer leaves once their events report
/// the end, through an endpoint of this backend to the requesting worker (kept for its next
/// requests): UCX may destroy the endpoint a message came in on once its callback returned.
struct engine::serving {
  struct reply_peer {
    ucp_ep_h ep = nullptr;
    std::uint32_t in_flight = 0;  ///< served copies that will answer on `ep`
    std::uint64_t used = 0;       ///< when it last served (a count of copy requests)
  };
  struct served {
    std::uint64_t token = 0;
    std::uint32_t worker = 0;
    reply_peer* to = nullptr;
    gpu_streams g;
    std::vector<std::shared_ptr<ipc_mapping>> keep;  ///< the peer's VRAM, open until the end
    std::vector<std::pair<std::uintptr_t, std::size_t>> host;  ///< host ranges it touches
  };
  /// Idle reply endpoints beyond this many per worker are closed, least recently used first.
  static constexpr std::size_t max_replies = 64;

  /// Held from a request's checks until its copies are listed, and while a deregistration
  /// waits for them (lock order: this, then copy_mu_).
  std::mutex mu;
  std::vector<std::unique_ptr<served>> running;
  std::vector<std::map<std::string, reply_peer, std::less<>>> replies;  ///< per worker
  std::uint64_t uses = 0;

  /// The endpoint of worker `w` (`worker`) to the requesting worker at `address`, created at
  /// its first request (called under `mu`, inside the worker's progress); null when UCX
  /// cannot reach it.
  reply_peer* reply_to(ucp_worker_h worker, std::uint32_t w, std::string_view address);
  /// Closes the reply endpoints, waiting for them at most until `deadline_ns` (teardown, no
  /// other thread left).
  void close_replies(std::span<worker_handle> workers, std::int64_t deadline_ns) noexcept;
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
