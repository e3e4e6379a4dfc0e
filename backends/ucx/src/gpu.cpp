// DRAM <-> VRAM of one host through the CUDA driver (`host_vram_copy=cuda`), over the process's
// one CUDA driver (nixl/detail/cuda_driver.hpp: loaded at run time, one primary context and
// stream per device) and its one table of CUDA IPC mappings (nixl/detail/cuda_ipc.hpp); what is
// the UCX backend's own: host memory pinned on first use, UCX's cuda_ipc key, the copies.
//
// Why: UCX 1.22 moves host memory into the GPU memory of another UCX context (another process,
// or another agent of this process) only through host staging: cuda_copy reaches its own
// context only (its interface id is random per context) and cuda_ipc takes GPU memory alone
// as the local buffer (access_mem_types = CUDA). The put or get then becomes put/rndv with a
// rndv/get/mtype or rndv/rtr/mtype receive (UCX_RMA_PPLN_ENABLE=y), or software emulation: a
// CPU copy between the processes (cma, shared memory) and a copy per fragment to or from the
// GPU (docs/ucx.md, "GPU memory"). The driver copies host <-> GPU directly, at the copy
// engine's speed, once the host pages are pinned and the peer's GPU memory is mapped here:
// through the CUDA IPC handle the peer exports with the region (its region data), else through
// UCX's cuda_ipc key (ucp_rkey_ptr), which UCX unpacks only where an endpoint has a cuda_ipc
// lane (not for a process whose side is host memory).

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::ucx::detail {
namespace {

namespace cu = nixl::detail::cu;

/// The driver when it has what the copies need (cuMemcpyAsync, cuStreamSynchronize,
/// cuMemHostRegister, cuMemHostUnregister), else null: DRAM <-> VRAM stays with UCX.
cu::driver* drv() noexcept {
  static cu::driver* d = [] {
    cu::driver* x = cu::usable_driver();
    const char* m = x != nullptr ? x->lacks({"cuStreamSynchronize", "cuMemcpyAsync",
                                             "cuMemHostRegister_v2", "cuMemHostUnregister"})
                                 : nullptr;
    if (x == nullptr || m != nullptr) {
      log::debug("UCX: DRAM <-> VRAM stays with UCX: the CUDA driver copies need {}",
                 x == nullptr ? cu::get_driver().why
                              : fmt::format("the CUDA driver (libcuda.so.1) with {}", m));
      return static_cast<cu::driver*>(nullptr);
    }
    return x;
  }();
  return d;
}

/// Host ranges this process pinned here: start -> (length, context it was pinned in).
struct pinned_ranges {
  std::mutex mu;
  std::map<std::uintptr_t, std::pair<std::size_t, cu::CUcontext>> at;
  static pinned_ranges& get() {
    static auto* p = new pinned_ranges;  // used by deregistrations until the process ends
    return *p;
  }
};

/// The primary context and stream of the device holding `p` (a device address valid here),
/// asked through device `dev_hint`.
cu::device_res* device_of(cu::driver* d, cu::CUdeviceptr p, std::uint64_t dev_hint) noexcept {
  cu::device_res* hint = d->device(d->clamp(dev_hint));
  if (hint == nullptr) return nullptr;
  int ordinal = -1;
  {
    cu::ctx_scope cs(*d, hint->ctx);
    if (!cs.ok() || d->pointer_attr(&ordinal, cu::attr_device_ordinal, p) != cu::success)
      return nullptr;
  }
  return d->device(ordinal);
}

}  // namespace

namespace gpu {

std::optional<ipc_export> export_vram(std::uintptr_t addr, std::size_t len,
                                      std::uint64_t dev_hint) noexcept {
  if (drv() == nullptr || addr == 0) return std::nullopt;
  try {
    std::string err;
    auto x = cu::export_ipc(addr, len, dev_hint, err);
    if (!x) log::debug("UCX: VRAM at {:#x}: {}; not exported", addr, err);
    return x;
  } catch (...) {
    return std::nullopt;
  }
}

std::shared_ptr<ipc_mapping> open_ipc(const ipc_export& x, const void* keeper) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return nullptr;
  try {
    const int dev = d->ordinal_of(x.uuid.data());
    if (dev < 0) {
      log::debug("UCX: the peer's GPU is not visible in this process; its VRAM stays with UCX");
      return nullptr;
    }
    std::string err;
    auto m = cu::open_ipc(x.handle, dev, err, keeper);
    if (!m) log::debug("UCX: {} (a peer's VRAM); it stays with UCX", err);
    return m;
  } catch (...) {
    return nullptr;
  }
}

mapped where(const ipc_mapping& m) noexcept {
  const cu::ipc_view& v = m.view();
  return {v.base, located{v.ctx, v.stream}, v.size};
}

std::optional<located> locate(const void* vram, std::uint64_t dev_hint) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return std::nullopt;
  cu::device_res* r = device_of(d, reinterpret_cast<cu::CUdeviceptr>(vram), dev_hint);
  if (r == nullptr) return std::nullopt;
  return located{r->ctx, r->stream};
}

void* map_remote(ucp_rkey_h rkey, std::uint64_t raddr, std::uint64_t dev_hint) noexcept {
  cu::driver* d = drv();
  if (d == nullptr || rkey == nullptr) return nullptr;
  cu::device_res* r = d->device(d->clamp(dev_hint));
  if (r == nullptr) return nullptr;
  cu::ctx_scope cs(*d, r->ctx);
  if (!cs.ok()) return nullptr;
  // cuda_ipc maps the peer's allocation in the current context's device (and caches it).
  void* p = nullptr;
  const ucs_status_t s = ucp_rkey_ptr(rkey, raddr, &p);
  if (s != UCS_OK) {
    log::debug("UCX: ucp_rkey_ptr({:#x}): {}", raddr, ucs_status_string(s));
    return nullptr;
  }
  return p;
}

void pin(std::uintptr_t addr, std::size_t len, std::uint64_t dev_hint) noexcept {
  cu::driver* d = drv();
  if (d == nullptr || addr == 0 || len == 0) return;
  cu::device_res* r = d->device(d->clamp(dev_hint));
  if (r == nullptr) return;
  pinned_ranges& pr = pinned_ranges::get();
  std::lock_guard lk(pr.mu);
  auto it = pr.at.upper_bound(addr);
  if (it != pr.at.begin()) {
    auto prev = std::prev(it);
    if (addr - prev->first < prev->second.first) return;  // inside a range pinned here
  }
  if (it != pr.at.end() && it->first - addr < len) return;  // overlaps a later one
  cu::ctx_scope cs(*d, r->ctx);
  if (!cs.ok()) return;
  unsigned type = 0;
  // Known to CUDA already (cudaMallocHost, cudaHostRegister, UCX's cuda_copy registration).
  if (d->pointer_attr(&type, cu::attr_memory_type, static_cast<cu::CUdeviceptr>(addr)) ==
      cu::success)
    return;
  const cu::CUresult res =
      d->host_register(reinterpret_cast<void*>(addr), len, cu::host_register_portable);
  try {
    if (res != cu::success) {
      log::warn(
          "UCX: cuMemHostRegister({:#x}, {} bytes): {}; DRAM <-> VRAM copies of it stay "
          "pageable (slower)",
          addr, len, d->what(res));
      return;
    }
    pr.at.emplace(addr, std::make_pair(len, r->ctx));
  } catch (...) {
    (void)d->host_unregister(reinterpret_cast<void*>(addr));
  }
}

void unpin_range(std::uintptr_t addr, std::size_t len) noexcept {
  cu::driver* d = cu::driver_if_loaded();
  if (d == nullptr || d->host_unregister == nullptr) return;
  pinned_ranges& pr = pinned_ranges::get();
  std::lock_guard lk(pr.mu);
  for (auto it = pr.at.lower_bound(addr); it != pr.at.end() && it->first - addr < len;) {
    cu::ctx_scope cs(*d, it->second.second);
    if (const cu::CUresult res = d->host_unregister(reinterpret_cast<void*>(it->first));
        res != cu::success) {
      try {
        log::warn("UCX: cuMemHostUnregister({:#x}): {}", it->first, d->what(res));
      } catch (...) {
      }
    }
    it = pr.at.erase(it);
  }
}

}  // namespace gpu

namespace {

void sync_stream(cu::driver& d, void* ctx, void* stream, status& st) noexcept {
  cu::ctx_scope cs(d, static_cast<cu::CUcontext>(ctx));
  if (const cu::CUresult res = d.stream_sync(static_cast<cu::CUstream>(stream));
      res != cu::success) {
    st = status::backend;
    try {
      log::error("UCX: DRAM <-> VRAM copy: cuStreamSynchronize: {}", d.what(res));
    } catch (...) {
    }
  }
}

}  // namespace

gpu_streams::~gpu_streams() {
  cu::driver* d = drv();
  if (d == nullptr || d->event_destroy == nullptr || from == owner::process) return;
  for (auto& [ctx, ev] : events)
    if (ev != nullptr) {
      cu::ctx_scope cs(*d, static_cast<cu::CUcontext>(ctx));
      (void)d->event_destroy(static_cast<cu::CUevent>(ev));
    }
}

namespace {

/// The process's interprocess events, per stream: a ring of `size` events recorded in turn after
/// the copies run for other processes, which open them from their handles. Never destroyed: an
/// event another process opened must outlive its use there. Reused in turn: a process waiting
/// on an event recorded again waits for the later copies of the same stream too, which end
/// after its own.
struct event_ring {
  static constexpr std::size_t size = 32;
  struct entry {
    cu::CUevent ev = nullptr;
    cu::CUipcEventHandle handle{};
  };
  std::array<entry, size> at{};
  std::size_t made = 0;
  std::size_t next = 0;
};

struct event_rings {
  std::mutex mu;
  std::map<void*, event_ring> by_stream;
  static event_rings& get() {
    static auto* r = new event_rings;  // see event_ring
    return *r;
  }
};

/// The next event of `stream`'s ring (its context current), or null.
const event_ring::entry* ring_event(cu::driver& d, void* stream) noexcept {
  try {
    event_rings& rs = event_rings::get();
    std::lock_guard lk(rs.mu);
    event_ring& r = rs.by_stream[stream];
    if (r.made < event_ring::size) {
      event_ring::entry e;
      if (d.event_create(&e.ev, cu::event_ipc_flags) != cu::success) return nullptr;
      if (d.ipc_event_get(&e.handle, e.ev) != cu::success) {
        (void)d.event_destroy(e.ev);
        return nullptr;
      }
      r.at[r.made++] = e;
    }
    const event_ring::entry* e = &r.at[r.next];
    r.next = (r.next + 1) % r.made;
    return e;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

bool gpu_ipc_events() noexcept {
  cu::driver* d = drv();
  return d != nullptr &&
         d->lacks({"cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventDestroy_v2",
                   "cuIpcGetEventHandle", "cuIpcOpenEventHandle"}) == nullptr;
}

namespace {

/// Other processes' events opened here (context, handle -> event), kept open for their next
/// answers: their rings reuse 32 handles per stream, and opening and closing one costs more
/// than the copies it ends at small sizes. Never closed (at most `max`; beyond, events are
/// opened per answer and closed after it).
struct opened_events {
  static constexpr std::size_t max = 1024;
  std::mutex mu;
  std::map<std::pair<void*, std::array<char, 64>>, cu::CUevent> at;
  static opened_events& get() {
    static auto* t = new opened_events;  // see above
    return *t;
  }
};

bool open_event(cu::driver& d, const std::array<char, 64>& handle, cu::CUevent& e) noexcept {
  cu::CUipcEventHandle h{};
  std::memcpy(h.reserved, handle.data(), sizeof h.reserved);
  const cu::CUresult res = d.ipc_event_open(&e, h);
  if (res == cu::success) return true;
  try {
    log::error("UCX: copy request: cuIpcOpenEventHandle: {}", d.what(res));
  } catch (...) {
  }
  return false;
}

}  // namespace

status gpu_import(const ipc_events& ev, void* ctx, gpu_streams& g) noexcept {
  g.n = 0;
  g.recorded = 0;
  g.events.fill({nullptr, nullptr});
  g.from = gpu_streams::owner::process;
  cu::driver* d = drv();
  if (d == nullptr || !gpu_ipc_events() || ev.n > gpu_streams::max) return status::backend;
  cu::ctx_scope cs(*d, static_cast<cu::CUcontext>(ctx));
  if (!cs.ok()) return status::backend;
  try {
    opened_events& t = opened_events::get();
    std::lock_guard lk(t.mu);
    std::size_t missing = 0;
    for (std::size_t i = 0; i < ev.n; ++i) missing += t.at.count({ctx, ev.handles[i]}) == 0;
    if (t.at.size() + missing <= opened_events::max) {
      for (std::size_t i = 0; i < ev.n; ++i) {
        auto [it, added] = t.at.try_emplace({ctx, ev.handles[i]}, nullptr);
        if (added && !open_event(*d, ev.handles[i], it->second)) {
          t.at.erase(it);
          return status::backend;
        }
        g.events[g.recorded++] = {ctx, it->second};
      }
      return status::success;
    }
  } catch (...) {  // out of memory: opened for this answer alone
  }
  g.from = gpu_streams::owner::imported;
  for (std::size_t i = 0; i < ev.n; ++i) {
    cu::CUevent e = nullptr;
    if (!open_event(*d, ev.handles[i], e)) {
      gpu_drop(g);
      return status::backend;
    }
    g.events[g.recorded++] = {ctx, e};
  }
  return status::success;
}

void gpu_drop(gpu_streams& g) noexcept {
  cu::driver* d = drv();
  if (g.from == gpu_streams::owner::imported && d != nullptr)
    for (auto& [ctx, ev] : g.events)
      if (ev != nullptr) {
        cu::ctx_scope cs(*d, static_cast<cu::CUcontext>(ctx));
        (void)d->event_destroy(static_cast<cu::CUevent>(ev));
        ev = nullptr;
      }
  g.n = 0;
  g.recorded = 0;
}

status gpu_issue(std::span<const gpu_item> items, gpu_streams& g, bool record,
                 ipc_events* shared) noexcept {
  g.n = 0;
  g.recorded = 0;
  if (shared != nullptr) {
    shared->n = 0;
    g.from = gpu_streams::owner::process;
    record = record && gpu_ipc_events();
  }
  cu::driver* d = drv();
  if (d == nullptr) return status::backend;
  status st = status::success;
  for (const gpu_item& it : items) {
    {
      cu::ctx_scope cs(*d, static_cast<cu::CUcontext>(it.ctx));
      const cu::CUresult res = cs.ok()
                                   ? d->memcpy_async(reinterpret_cast<cu::CUdeviceptr>(it.dst),
                                                     reinterpret_cast<cu::CUdeviceptr>(it.src),
                                                     it.len, static_cast<cu::CUstream>(it.stream))
                                   : cu::error_invalid_context;
      if (res != cu::success) {
        st = status::backend;
        try {
          log::error("UCX: DRAM <-> VRAM copy of {} bytes ({} -> {}): {}", it.len, it.src, it.dst,
                     d->what(res));
        } catch (...) {
        }
        break;
      }
    }
    bool seen = false;
    for (std::size_t i = 0; i < g.n; ++i) seen = seen || g.used[i].second == it.stream;
    if (seen) continue;
    if (g.n == gpu_streams::max) {  // more streams than tracked: wait for those so far
      for (std::size_t i = 0; i < g.n; ++i) sync_stream(*d, g.used[i].first, g.used[i].second, st);
      g.n = 0;
    }
    g.used[g.n++] = {it.ctx, it.stream};
  }
  const bool events = record && st == status::success && d->event_create != nullptr &&
                      d->event_record != nullptr && d->event_query != nullptr &&
                      d->event_destroy != nullptr;
  // After an error too: what was issued finishes before the caller may reuse the buffers.
  std::size_t k = 0;
  for (std::size_t i = 0; i < g.n; ++i) {
    auto [ctx, stream] = g.used[i];
    if (events) {
      cu::ctx_scope cs(*d, static_cast<cu::CUcontext>(ctx));
      if (shared != nullptr) {  // the ring's next event: another process waits on it
        const auto* e = cs.ok() ? ring_event(*d, stream) : nullptr;
        if (e != nullptr &&
            d->event_record(e->ev, static_cast<cu::CUstream>(stream)) == cu::success) {
          g.events[k++] = {ctx, e->ev};
          std::memcpy(shared->handles[shared->n++].data(), e->handle.reserved,
                      sizeof e->handle.reserved);
          continue;
        }
      } else {
        auto& [ectx, ev] = g.events[k];
        if (ev != nullptr && ectx != ctx) {  // an event of another context: replaced
          cu::ctx_scope old(*d, static_cast<cu::CUcontext>(ectx));
          (void)d->event_destroy(static_cast<cu::CUevent>(ev));
          ev = nullptr;
        }
        constexpr unsigned disable_timing = 2;  // CU_EVENT_DISABLE_TIMING
        cu::CUevent e = ev;
        if (cs.ok() && (e != nullptr || d->event_create(&e, disable_timing) == cu::success)) {
          ectx = ctx;
          ev = e;
          if (d->event_record(e, static_cast<cu::CUstream>(stream)) == cu::success) {
            ++k;
            continue;
          }
        }
      }
    }
    sync_stream(*d, ctx, stream, st);  // no event: waited for here
  }
  g.recorded = k;
  return st;
}

status gpu_query(gpu_streams& g) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return status::backend;
  while (g.recorded > 0) {
    auto [ctx, ev] = g.events[g.recorded - 1];
    const cu::CUresult res = d->event_query(static_cast<cu::CUevent>(ev));
    if (res == cu::error_not_ready) return status::in_progress;
    if (res != cu::success) {
      try {
        log::error("UCX: DRAM <-> VRAM copy: cuEventQuery: {}", d->what(res));
      } catch (...) {
      }
      gpu_wait(g);
      g.recorded = 0;
      return status::backend;
    }
    --g.recorded;
  }
  return status::success;
}

void gpu_wait(const gpu_streams& used) noexcept {
  cu::driver* d = drv();
  if (d == nullptr) return;
  if (used.n == 0) {  // another process's events (no stream of this one): polled
    for (std::size_t i = 0; i < used.recorded; ++i) {
      auto [ctx, ev] = used.events[i];
      cu::ctx_scope cs(*d, static_cast<cu::CUcontext>(ctx));
      while (cs.ok() && d->event_query(static_cast<cu::CUevent>(ev)) == cu::error_not_ready)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return;
  }
  status ignored = status::success;
  for (std::size_t i = 0; i < used.n; ++i)
    sync_stream(*d, used.used[i].first, used.used[i].second, ignored);
}

status gpu_copy(std::span<const gpu_item> items) noexcept {
  gpu_streams g;
  return gpu_issue(items, g, false);
}

bool engine::watch_gpu(op_slot* s, gpu_streams& g) noexcept {
  // Listed once issued: a reaper on another thread reads `g` only under gpu_mu_.
  try {
    std::lock_guard lk(gpu_mu_);
    gpu_slots_.emplace_back(s, &g);
    gpu_pending_.fetch_add(1, std::memory_order_release);
  } catch (...) {
    return false;
  }
  wake_for(s->worker);  // the progress thread watches the events while they are pending
  return true;
}

void engine::gpu_start(op_slot* s, std::span<const gpu_item> items) noexcept {
  const status st = gpu_issue(items, s->gpu_used, true);
  if (st == status::success && s->gpu_used.recorded > 0) {
    if (watch_gpu(s, s->gpu_used)) return;
    gpu_wait(s->gpu_used);  // out of memory: the copies are waited for here
    flush_done(s);
    return;
  }
  s->fail(st);
  flush_done(s);  // everything ended here
}

void engine::reap_gpu() noexcept {
  std::array<std::tuple<op_slot*, gpu_streams*, status>, 32> done{};
  std::size_t n = 0;
  {
    std::unique_lock lk(gpu_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return;  // another thread is reaping
    for (std::size_t i = 0; i < gpu_slots_.size() && n < done.size();) {
      auto [s, g] = gpu_slots_[i];
      const status st = g->recorded > 0 ? gpu_query(*g) : status::in_progress;
      if (st == status::in_progress) {
        ++i;
        continue;
      }
      done[n++] = {s, g, st};
      gpu_slots_[i] = gpu_slots_.back();
      gpu_slots_.pop_back();
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    finish_gpu(std::get<0>(done[i]), *std::get<1>(done[i]), std::get<2>(done[i]));
}

void engine::finish_gpu(op_slot* s, gpu_streams& g, status st) noexcept {
  gpu_pending_.fetch_sub(1, std::memory_order_acq_rel);
  gpu_drop(g);  // a peer's events: closed here
  s->fail(st);
  flush_done(s);
}

void engine::wait_gpu(op_slot* s) noexcept {
  std::array<gpu_streams*, 2> mine{};
  std::size_t n = 0;
  {
    std::lock_guard lk(gpu_mu_);
    for (std::size_t i = 0; i < gpu_slots_.size();) {
      if (gpu_slots_[i].first != s) {
        ++i;
        continue;
      }
      if (n < mine.size()) mine[n++] = gpu_slots_[i].second;
      gpu_slots_[i] = gpu_slots_.back();
      gpu_slots_.pop_back();
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    gpu_wait(*mine[i]);
    const status st = gpu_query(*mine[i]);
    finish_gpu(s, *mine[i], st == status::in_progress ? status::backend : st);
  }
}

}  // namespace nixl::ucx::detail
