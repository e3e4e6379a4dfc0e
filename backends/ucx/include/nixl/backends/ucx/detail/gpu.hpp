#pragma once
/// DRAM <-> VRAM of one host copied by the CUDA driver for the UCX backend (`host_vram_copy`,
/// docs/ucx.md "GPU memory"): UCX 1.22 has no transport that moves host memory into another
/// UCX context's GPU memory, so it stages such transfers through host fragments. The driver
/// (loaded at run time; absent: the path is off) copies instead, from pinned host memory.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include <nixl/detail/cuda_ipc.hpp>
#include <nixl/status.hpp>

namespace nixl::ucx::detail {

/// One descriptor the driver copies: both addresses are valid in this process (VRAM of
/// another process mapped through CUDA IPC). `stream` and `ctx` belong to the device of the
/// VRAM side.
struct gpu_item {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t len = 0;
  void* ctx = nullptr;
  void* stream = nullptr;
};

/// VRAM exported for the driver copies of another process on this host (the CUDA IPC handle
/// of the allocation holding the region, its device's UUID, where the region starts in it),
/// and a peer's allocation opened here from one: one mapping per allocation in the process,
/// shared by every region, backend and agent of it (nixl/detail/cuda_ipc.hpp).
using ipc_export = nixl::detail::cu::ipc_export;
using ipc_mapping = nixl::detail::cu::ipc_lease;

/// A peer region's export and the mapping opened from it at its first use here.
struct ipc_slot {
  ipc_export x;
  std::mutex mu;
  bool tried = false;
  std::shared_ptr<ipc_mapping> map;
};

/// A peer's host memory mapped into this process by UCX (its shared-memory key: memory the
/// peer's UCX allocated) and pinned here for the driver's copies; unpinned when the region is
/// unloaded.
struct host_map_slot {
  std::mutex mu;
  bool tried = false;
  char* base = nullptr;  ///< where the region starts here; null: not mappable
  std::size_t len = 0;
};

/// The streams (context, stream) that a request's driver copies went out on, and an event per
/// stream recorded after them. Whose events they are (`from`): this object's own (created at the
/// first use, kept for the next, destroyed with this object), the process's (its ring of events
/// recorded after copies run for other processes, or the events it opened from their handles
/// and keeps open: never destroyed), or another process's events opened for this object alone
/// (destroyed by gpu_drop or with this object).
struct gpu_streams {
  static constexpr std::size_t max = 8;
  enum class owner : std::uint8_t { own, process, imported };
  std::array<std::pair<void*, void*>, max> used{};
  std::array<std::pair<void*, void*>, max> events{};  ///< (context, event)
  std::size_t n = 0;
  std::size_t recorded = 0;  ///< events recorded after the last issue
  owner from = owner::own;
  gpu_streams() = default;
  gpu_streams(const gpu_streams&) = delete;
  gpu_streams& operator=(const gpu_streams&) = delete;
  ~gpu_streams();
};

/// The CUDA IPC handles of the events recorded after copies this process runs for another one
/// (an answer to its copy request), one per stream used.
struct ipc_events {
  std::array<std::array<char, 64>, gpu_streams::max> handles{};
  std::size_t n = 0;
};

/// Issues the copies of `items`. With `record`, it does not wait: an event after them on each
/// stream used (`g.recorded`) tells their end to `gpu_query`. With `shared` too, those events
/// come from the process's ring of interprocess events and their handles go to `shared`, so
/// that another process can wait on them (gpu_import). It waits instead without `record`, for
/// the streams beyond the 8 it tracks, for a stream whose event cannot be recorded, and, after
/// an error (`backend`), for everything issued.
status gpu_issue(std::span<const gpu_item> items, gpu_streams& g, bool record,
                 ipc_events* shared = nullptr) noexcept;
/// Whether the copies of the last gpu_issue (or those whose events gpu_import opened) have
/// ended: in_progress, success, or backend (an event reported an error).
status gpu_query(gpu_streams& g) noexcept;
/// Waits for the copies issued on `g` (or those whose events gpu_import opened).
void gpu_wait(const gpu_streams& g) noexcept;
/// Copies every item and waits for them (the data is in place on `success`).
status gpu_copy(std::span<const gpu_item> items) noexcept;
/// Whether this process can export (gpu_issue with `shared`) and open (gpu_import) the events
/// of copies run for another process.
bool gpu_ipc_events() noexcept;
/// Opens another process's events `ev` in context `ctx` into `g`, so that gpu_query and
/// gpu_wait tell when its copies end; backend when one cannot be opened. The process keeps
/// them open for that process's next answers (up to 1024 events; beyond, they are opened for
/// `g` alone).
status gpu_import(const ipc_events& ev, void* ctx, gpu_streams& g) noexcept;
/// Empties `g`, closing the events gpu_import opened for it alone.
void gpu_drop(gpu_streams& g) noexcept;

}  // namespace nixl::ucx::detail
