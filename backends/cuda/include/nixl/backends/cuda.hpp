#pragma once
/// `nixl::cuda::backend`: moves VRAM <-> VRAM and VRAM <-> DRAM between agents of one host, in
/// one process or across processes (CUDA IPC), with the CUDA runtime only.
///
/// - Registration: VRAM of any GPU, including a sub-range of a larger allocation (a tensor of a
///   caching allocator); DRAM, pinned already or pageable (pinned here with cudaHostRegister).
/// - Public region data: CUDA IPC handle, offset inside the allocation, GPU UUID, host boot id and
///   a process token, so that a peer in another process maps the memory and a peer on another
///   host is refused with a clear message.
/// - Transfers: descriptors up to `kernel_max_bytes` go to one launch of a batched copy kernel
///   (16-byte vector accesses, many blocks in flight); larger ones to the copy engines
///   (cudaMemcpyAsync). Completion is a CUDA event polled by `check()`: no host thread blocks.
/// - Notifications: a Unix datagram to the target's socket, sent once the request's events have
///   completed, i.e. after its data is visible at the target.
///
/// This header includes no CUDA header. See docs/cuda.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/cuda/copy.hpp>
#include <nixl/backends/cuda/notify.hpp>
#include <nixl/concepts.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

struct CUevent_st;

namespace nixl::cuda {

namespace detail {
struct backend_state;

/// Owns a CUDA event; waits for it before destroying it.
class event_handle {
 public:
  event_handle() = default;
  explicit event_handle(CUevent_st* e) noexcept : e_(e) {}
  event_handle(event_handle&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  event_handle& operator=(event_handle&& o) noexcept {
    if (this != &o) {
      reset();
      e_ = o.e_;
      o.e_ = nullptr;
    }
    return *this;
  }
  ~event_handle() { reset(); }
  CUevent_st* get() const noexcept { return e_; }
  void reset() noexcept;

 private:
  CUevent_st* e_ = nullptr;
};

/// Owns device memory from cudaMalloc.
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(void* p, int dev) noexcept : p_(p), dev_(dev) {}
  device_buffer(device_buffer&& o) noexcept : p_(o.p_), dev_(o.dev_) { o.p_ = nullptr; }
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      dev_ = o.dev_;
      o.p_ = nullptr;
    }
    return *this;
  }
  ~device_buffer() { reset(); }
  void* get() const noexcept { return p_; }
  void reset() noexcept;

 private:
  void* p_ = nullptr;
  int dev_ = -1;
};
}  // namespace detail

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
  /// (nixl::prefers; typed lists keep the agent's type order): on
  /// two H200s, one request below 1 MiB takes about half the time it takes through UCX's
  /// cuda_ipc, and 64 small blocks 38 times less (docs/performance.md). Peers it cannot reach
  /// (another host, another process's DRAM) are refused with not_supported, and the agent
  /// passes those requests to the next backend.
  static constexpr bool prefers(mem_kind local, mem_kind remote) noexcept {
    return can_move(local, remote);
  }

  /// Parameters (all optional; values are strings):
  /// - `streams_per_gpu` (4): streams per GPU that requests take in turn.
  /// - `kernel_max_bytes` (1 MiB, measured: docs/cuda.md): descriptors of at most this size go
  ///   to the batch kernel; larger ones to the copy engines. 0 disables the kernel.
  /// - `kernel_min_count` (3): fewer small descriptors than this in a request use the copy
  ///   engines as well (one copy call costs about one launch).
  /// - `pin_dram` (true): pin pageable DRAM at registration with cudaHostRegister.
  struct config {
    unsigned streams_per_gpu = 4;
    std::size_t kernel_max_bytes = 1024 * 1024;
    std::size_t kernel_min_count = 3;
    bool pin_dram = true;

    /// Throws `nixl::error(invalid_param)` naming a bad value.
    static config from_params(const nixl::params& p);
    nixl::params to_params() const;
  };
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
    /// Why this backend cannot reach the region (0: it can). Metadata of a peer on another
    /// host, or DRAM of another process, still loads (other backends may reach it); a
    /// transfer through this backend is then refused with the reason.
    std::uint8_t unreachable = 0;
  };

  /// A remote agent.
  struct peer {
    std::string agent;
    std::string host;  // its host name, for messages
    bool same_host = false;
    bool same_process = false;
    detail::socket_address socket;
  };

  /// The part of a request that runs on one GPU.
  struct lane {
    int device = -1;
    CUstream_st* stream = nullptr;
    detail::device_buffer items;  // kernel items, in device memory
    detail::event_handle done;    // recorded after the lane's work
    std::uint32_t kernel_count = 0;
    std::uint32_t grid = 0;
    std::vector<detail::copy_item> engine;  // copies for the copy engines
  };

  /// Per-request state: everything post/check need, resolved in prepare.
  struct request {
    std::vector<lane> lanes;
    std::string datagram;  // notification: header + sender prefix, message appended
    std::size_t prefix = 0;
    const peer* target = nullptr;
    std::uint8_t phase = 0;  // see backend.cpp
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
  nixl::status post(request& req, nixl::notif_arg notif) noexcept;
  nixl::status check(request& req) noexcept;
  /// Waits for a posted request to finish (copies cannot be cancelled) and frees it.
  nixl::status release(request& req) noexcept;

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

  /// GPUs visible to this process (0 when none).
  static int device_count() noexcept;
  /// Why there is no GPU, when `device_count() == 0`.
  static std::string_view no_device_reason() noexcept;
  const config& settings() const noexcept;

 private:
  int exec_device(const region& l, const remote_region& r, xfer_op op) const;
  std::uintptr_t access_on(const remote_region& r, int device) const;
  bool ensure_peer_access(int from, int to);
  CUstream_st* take_stream(int device);

  std::unique_ptr<detail::backend_state> st_;
};

static_assert(nixl::backend<backend>);
static_assert(nixl::loopback_backend<backend>);
static_assert(nixl::remote_backend<backend>);
static_assert(nixl::notifying_backend<backend>);
static_assert(nixl::backend_for<backend, nixl::vram_t, nixl::vram_t>);
static_assert(nixl::backend_for<backend, nixl::dram_t, nixl::vram_t>);
static_assert(nixl::backend_for<backend, nixl::vram_t, nixl::dram_t>);
static_assert(!nixl::backend_for<backend, nixl::dram_t, nixl::dram_t>);

}  // namespace nixl::cuda
