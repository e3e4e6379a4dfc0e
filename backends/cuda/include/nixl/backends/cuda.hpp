#pragma once
/// `nixl::cuda::backend`: moves VRAM <-> VRAM and VRAM <-> DRAM between agents of one host, in
/// one process or across processes (CUDA IPC), with the CUDA runtime only.
///
/// - Registration: VRAM of any GPU, including a sub-range of a larger allocation (a tensor of a
///   caching allocator); DRAM, pinned already or pageable (pinned here with cudaHostRegister).
/// - Public data: the region's CUDA IPC handle, offset inside the allocation and GPU UUID; the
///   connection info carries the host identity (nixl::detail::host_identity), so that a peer in
///   another process of this host maps the memory and a peer on another host is refused with a
///   clear message.
/// - Transfers: descriptors up to `kernel_max_bytes` go to one launch of a batched copy kernel
///   (16-byte vector accesses, many blocks in flight); larger ones to the copy engines
///   (cudaMemcpyAsync). Completion is a CUDA event polled by `check()`: no host thread blocks.
/// - Notifications: a Unix datagram to the target's socket, sent once the request's events have
///   completed, i.e. after its data is visible at the target.
///
/// The hot path (post, check, release) is inline here, on the state in cuda/detail/; this
/// header includes the CUDA runtime's API header. See docs/cuda.md.

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/cuda/config.hpp>
#include <nixl/backends/cuda/detail/request.hpp>
#include <nixl/backends/cuda/detail/state.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/backend_checks.hpp>
#include <nixl/detail/completion.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::cuda {

/// Why this backend cannot reach a peer's region. Metadata of a peer on another host, or DRAM of
/// another process, still loads (other backends may reach it); a transfer through this backend
/// is then refused with the reason.
enum class reach : std::uint8_t { ok, other_host, other_process_dram, no_ipc, no_gpu };

/// The CUDA backend ("CUDA"): VRAM and DRAM, loopback, peers of the same host, notifications.
class backend {
 public:
  static constexpr std::string_view name = "CUDA";
  using memory_kinds = nixl::kind_list<nixl::dram_t, nixl::vram_t>;
  /// One side at least must be GPU memory: DRAM <-> DRAM is not this backend's job.
  static constexpr bool can_move(mem_kind local, mem_kind remote) noexcept {
    return local == mem_kind::vram || remote == mem_kind::vram;
  }
  /// An agent that also has UCX tries this backend first for these pairs with run-time lists
  /// (nixl::prefers; typed lists keep the agent's type order): on two H200s, one request below
  /// 1 MiB takes about half the time it takes through UCX's cuda_ipc, and 64 small blocks 38
  /// times less (docs/performance.md). Peers it cannot reach (another host, another process's
  /// DRAM) are refused with not_supported, and the agent passes those requests to the next
  /// backend.
  static constexpr bool prefers(mem_kind local, mem_kind remote) noexcept {
    return can_move(local, remote);
  }

  /// Parameters: cuda/config.hpp.
  using config = cuda::config;
  /// The parameters and their defaults.
  static nixl::params default_params() { return config{}.to_params(); }

  /// A local registration.
  struct region {
    mem_kind kind = mem_kind::dram;
    std::uintptr_t addr = 0;
    std::size_t len = 0;
    int device = -1;             // GPU ordinal for VRAM, -1 for DRAM
    std::uintptr_t access = 0;   // address a GPU uses for `addr`
    bool device_access = false;  // kernels can reach it (VRAM, or pinned mapped DRAM)
    bool pinned_here = false;    // cudaHostRegister'ed by this backend
    std::string blob;            // public data
  };

  /// A peer's region (or our own, for loopback) as mapped into this process.
  struct remote_region {
    mem_kind kind = mem_kind::dram;
    std::uintptr_t addr = 0;  // the owner's address of the region
    std::size_t len = 0;
    int device = -1;            // GPU (ordinal here) that holds the mapping, -1 for DRAM
    bool owner_gpu = false;     // `device` is the GPU whose memory this is
    std::uintptr_t access = 0;  // address here that corresponds to `addr`
    bool device_access = false;
    void* ipc_base = nullptr;  // set when mapped from an IPC handle (closed on unload)
    /// Across processes: the allocation's IPC handle, the region's offset inside it, and
    /// mappings of it on other GPUs of this process, each opened by the first request that
    /// executes on that GPU (copies run in the context that holds the mapping); closed on
    /// unload.
    std::array<char, 64> ipc_handle{};
    std::uint64_t ipc_offset = 0;
    mutable std::vector<std::pair<int, void*>> ipc_more;
    /// Whether this backend reaches the region; a transfer is refused with the reason if not.
    reach reachable = reach::ok;
  };

  /// A remote agent.
  struct peer {
    std::string agent;
    std::string host;  // its host name, for messages
    bool same_host = false;
    bool same_process = false;
    detail::socket_address socket;
  };

  /// Per-request state: everything post/check need, resolved in prepare.
  struct request {
    std::vector<detail::lane> lanes;
    std::string datagram;    // notification: header and sender name, then the message
    std::size_t prefix = 0;  // length of the header and sender name
    const peer* target = nullptr;
    // Busy: its copies are issued and `check` polls their events, then (`notifying`) the
    // notification waits for room in the target's queue.
    nixl::detail::completion state;
    bool notifying = false;
    bool notify = false;
    std::size_t next_lane = 0;  // lanes before this one have completed
    std::size_t bytes = 0;
  };

  /// Creates streams lazily and binds the notification socket. Without a GPU the backend is
  /// created but refuses registration with the reason. Throws `nixl::error`.
  backend(const config& cfg, const nixl::backend_context& ctx);
  ~backend();
  backend(backend&&) noexcept;
  backend& operator=(backend&&) noexcept;

  /// Registers VRAM (`d.dev` = GPU ordinal) or DRAM. Throws `nixl::error`.
  region register_region(mem_kind kind, const nixl::reg_desc& d);
  void deregister_region(region& r) noexcept;

  /// Resolves a transfer. Throws `nixl::error`.
  void prepare(request& req, xfer_op op, std::span<const nixl::bound_desc<region>> local,
               std::span<const nixl::bound_desc<remote_region>> remote, peer& p);
  /// Issues the copies and records their events; never blocks nor allocates.
  nixl::status post(request& req, nixl::notif_arg notif) noexcept;
  /// Polls the events, then sends the notification; never blocks nor allocates.
  nixl::status check(request& req) noexcept;
  /// Waits for a posted request to finish (copies cannot be cancelled) and frees it. A request
  /// in flight with a notification sends an abort notice instead, after its copies ended.
  nixl::status release(request& req) noexcept {
    const bool in_flight = req.state.busy();
    req.lanes.clear();  // the event handles wait for what is in flight
    if (in_flight && req.notify) [[unlikely]]
      send_abort(req);
    req.state.reset();
    req.target = nullptr;
    return nixl::status::success;
  }

  // loopback
  peer self_peer();
  remote_region load_local(const region& r);
  void unload_region(remote_region& r) noexcept;

  // remote
  std::string connection_info() const;
  peer load_peer(std::string_view agent, std::span<const std::byte> conn_info);
  void unload_peer(peer& p) noexcept;
  std::string public_data(const region& r) const { return r.blob; }
  remote_region unpack(peer& p, mem_kind kind, const nixl::desc& d,
                       std::span<const std::byte> public_data);

  // notifications
  void notify(peer& p, std::string_view msg);
  void take_notifications(nixl::notif_map& out);
  /// Abort notices from peers (docs/error-model.md): their requests that carried a
  /// notification and ended without success.
  void take_aborts(nixl::notif_map& out);

  /// GPUs visible to this process (0 when none).
  static int device_count() noexcept;
  /// Why there is no GPU, when `device_count() == 0`.
  static std::string_view no_device_reason() noexcept;
  const config& settings() const noexcept { return st_->cfg; }

 private:
  int exec_device(const region& l, const remote_region& r, xfer_op op) const;
  std::uintptr_t access_on(const remote_region& r, int device) const;
  bool ensure_peer_access(int from, int to);
  cudaStream_t take_stream(int device);
  [[gnu::cold]] nixl::status query_failed(request& req, cudaError_t e) noexcept;
  [[gnu::cold]] nixl::status notify_failed(request& req, int err) noexcept;
  /// The request's notification sent as an abort notice (once; dropped when the target's
  /// queue is full or the target is gone).
  [[gnu::cold]] void send_abort(request& req) noexcept;
  /// A lane's copies could not be issued or failed: what was issued ends, then the request
  /// fails (with an abort notice when it carried a notification).
  [[gnu::cold]] nixl::status issue_failed(request& req) noexcept;

  std::unique_ptr<detail::backend_state> st_;  // stable address; the backend moves
};

inline nixl::status backend::post(request& req, nixl::notif_arg notif) noexcept {
  if (req.state.busy()) return nixl::status::repost_active;
  req.notify = notif.has_value();
  if (req.notify) {
    if (notif->size() > detail::max_notif_message) return nixl::status::invalid_param;
    try {  // capacity for 256 bytes of message is reserved at prepare
      detail::finish_datagram(req.datagram, req.prefix, *notif);
    } catch (...) {
      return nixl::status::backend;
    }
  }
  req.next_lane = 0;
  req.notifying = false;
  for (detail::lane& ln : req.lanes)
    if (!ln.issue()) [[unlikely]]
      return issue_failed(req);
  req.state.start();
  return check(req);
}

inline nixl::status backend::check(request& req) noexcept {
  if (!req.state.busy()) return req.state.result();
  if (!req.notifying) {
    for (; req.next_lane < req.lanes.size(); ++req.next_lane) {
      // cudaErrorNotReady is an answer, not a failure
      const cudaError_t e = cudaEventQuery(req.lanes[req.next_lane].done.get());
      if (e == cudaErrorNotReady) return nixl::status::in_progress;
      if (e != cudaSuccess) return query_failed(req, e);
    }
    if (!req.notify) return req.state.end(nixl::status::success);
    req.notifying = true;
  }
  const int rc = st_->socket.send(req.target->socket, req.datagram);
  if (rc == EAGAIN) return nixl::status::in_progress;  // the target's queue is full: retry
  if (rc != 0) return notify_failed(req, rc);
  return req.state.end(nixl::status::success);
}

static_assert(nixl::loopback_backend<backend> && nixl::remote_backend<backend> &&
              nixl::notifying_backend<backend> && nixl::aborting_backend<backend>);
static_assert(nixl::backend_for_all<backend, route<vram_t, vram_t>, route<dram_t, vram_t>,
                                    route<vram_t, dram_t>>);
static_assert(nixl::backend_for_none<backend, route<dram_t, dram_t>>);

}  // namespace nixl::cuda
