#pragma once
/// `nixl::ucx::config`: the UCX backend's settings, parsed from NIXL's parameter names.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nixl/detail/params.hpp>
#include <nixl/memory.hpp>

namespace nixl::ucx {

/// How endpoints detect a peer that went away (`ucx_error_handling_mode`).
enum class error_mode : std::uint8_t {
  /// NIXL's `peer`, the default: a dead peer ends its requests with `remote_disconnect`. The
  /// data endpoints stay in UCX mode `none` (shared memory, cma and zero-copy puts stay usable)
  /// and the failure is seen elsewhere: same host, a watch on the peer process; agents of one
  /// process, the table of live backends; another host, one more endpoint in UCX mode `peer`
  /// that carries no data. (`auto`, the earlier name, is read as this.)
  peer = 0,
  /// UCX mode `peer` on the data endpoints themselves (UCX 1.13 then uses TCP even between
  /// processes of one host, UCX 1.22 emulates puts between hosts): `ucx_peer`.
  ucx_peer = 1,
  /// UCX mode `none` and no watch: a dead peer leaves its requests in progress forever.
  none = 2,
};

std::string_view to_string(error_mode m) noexcept;

/// Who makes a request's UCX calls when a progress thread runs (`post_thread`): `automatic`
/// (`auto`, the default) hands the thread requests of at least `config::post_thread_ops`
/// operations, and every request on an endpoint with a TCP lane (UCX's tcp transport sends
/// inside the put call), so that post returns at once.
using post_thread_mode = nixl::detail::post_thread_mode;

/// Backend configuration. `from_params` takes NIXL's parameter names.
struct config {
  /// The most workers (`num_workers`, `num_threads`) one backend has.
  static constexpr std::size_t max_workers = 64;
  /// `post_thread=auto`: requests of this many operations or more go to the progress thread.
  static constexpr std::size_t post_thread_ops = 16;

  /// UCX workers; requests are spread over them round-robin (`num_workers`).
  std::size_t num_workers = 1;
  /// Application threads that post on this backend (`num_threads`, NIXL's name). When set, the
  /// backend has at least this many workers and binds a request to the worker of the thread
  /// that makes it, so that threads posting at once do not share a worker. 0: off.
  std::size_t num_threads = 0;
  /// Requests with more descriptors than this are posted as chunks of this many descriptors,
  /// one chunk per worker (`split_batch_size`, NIXL's name). 0: never split.
  std::size_t split_batch_size = 0;
  /// Network devices, comma separated (`device_list`, alias `ucx_devices`); empty = all.
  std::string device_list;
  /// Peer failure detection (`ucx_error_handling_mode`: peer, ucx_peer, none).
  error_mode error_handling = error_mode::peer;
  /// UCX settings `KEY=VALUE,KEY=VALUE` without the `UCX_` prefix (`engine_config`).
  std::string engine_config;
  /// After work, the progress thread keeps polling this long before it sleeps on the event fd
  /// (`progress_spin_us`): a target serving small requests then answers without a wake-up.
  std::chrono::microseconds progress_spin{50};
  /// An agent of another host that sends this one beats (docs/ucx.md, "Agents that only sent to
  /// this one") is gone once silent this long, or four of its beat periods when longer
  /// (`peer_timeout_ms`): raise it where a sender's progress thread may go without a core.
  std::chrono::milliseconds peer_timeout{2000};
  /// Progress thread (`enable_prog_thread`). When unset, the agent's setting decides (on by
  /// default in `nixl::agent_config`).
  std::optional<bool> enable_prog_thread;
  /// How DRAM <-> VRAM of this host moves (`host_vram_copy`): `cuda` (true, the default) lets
  /// the CUDA driver copy it, from pinned host memory, where the VRAM is mapped in this process
  /// (this process's, or a peer process's through CUDA IPC) and the driver loads; `ucx` (false)
  /// leaves it to UCX, which stages it through host memory (docs/ucx.md, "GPU memory").
  bool cuda_host_vram = true;
  /// How DRAM <-> DRAM with another process of this host moves where UCX's endpoint to it has
  /// a `cma` lane (`host_dram_copy`): `cma` (true, the default) copies each run of a request's
  /// descriptors with `process_vm_writev`/`process_vm_readv` calls of up to
  /// `config::cma_iov` blocks each, the system call UCX's cma transport makes once per put;
  /// `ucx` (false) leaves every descriptor to UCX (docs/ucx.md, "Same-host DRAM").
  bool cma_host_dram = true;
  /// `host_dram_copy=cma`: descriptors per system call.
  static constexpr std::size_t cma_iov = 64;
  /// `host_dram_copy=cma`: descriptors of at least this many bytes (`shm_min_size`, default 64
  /// MiB) go through UCX's shared-memory protocol instead of cma calls: the peer's worker
  /// copies them out of a shared-memory FIFO while this process copies them in, which beats
  /// the kernel's single copy for large blocks. The backend then gives UCX (1.22 and later)
  /// `PREFER_OFFLOAD=n` and `CMA_BW=100MBs` unless the environment or `engine_config` names
  /// them (docs/ucx.md, "Same-host DRAM"). 0: cma calls at every size and UCX's own settings.
  std::size_t shm_min_size = std::size_t{64} << 20;
  /// Who makes a request's UCX calls while a progress thread runs (`post_thread`: auto, always,
  /// never); without the thread the caller always does.
  post_thread_mode post_thread = post_thread_mode::automatic;

  /// Parses NIXL-style params; throws `nixl::error(invalid_param)` naming a bad value.
  static config from_params(const params& p);
  /// The params that give this config back.
  params to_params() const;
};

}  // namespace nixl::ucx
