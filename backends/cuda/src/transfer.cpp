// Transfers: where each copy runs (GPU, mapping, stream), the plan of a request (batch kernel
// or copy engines, per GPU), and the cold paths of post and check (inline in cuda.hpp).

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::cuda {

// The GPU that executes a copy: for VRAM <-> VRAM the one holding the source, so that data is
// pushed over NVLink (stores, measured a little faster than pulls) when this process sees that
// GPU; else the local GPU; for VRAM <-> DRAM the GPU side.
int backend::exec_device(const region& l, const remote_region& r, xfer_op op) const {
  if (l.kind == mem_kind::vram && r.kind == mem_kind::vram && op == xfer_op::read && r.owner_gpu)
    return r.device;
  if (l.kind == mem_kind::vram) return l.device;
  if (r.kind == mem_kind::vram) return r.device;
  raise(status::not_supported, "CUDA backend: DRAM -> DRAM needs no GPU; use another backend");
}

// The address through which GPU `device` reaches remote region `r`. A peer process's memory
// is mapped on its owning GPU at load (or GPU 0 when the owner is not visible here). A copy
// issued on another GPU's stream into that mapping went through a staged path: 38 GB/s instead
// of 390 between two H200s, and the batch kernel faulted (docs/cuda.md, "Across processes").
// So the memory is mapped again on the executing GPU, by the first request that runs there,
// and every copy runs in the context that holds its mapping.
std::uintptr_t backend::access_on(const remote_region& r, int device) const {
  if (r.ipc_base == nullptr || device == r.device) return r.access;
  {
    std::lock_guard lk(st_->mu);
    for (const auto& [dev, base] : r.ipc_more)
      if (dev == device) return reinterpret_cast<std::uintptr_t>(base) + r.ipc_offset;
  }
  void* base = detail::ipc_open(r.ipc_handle, device);
  std::lock_guard lk(st_->mu);
  for (const auto& [dev, b] : r.ipc_more)
    if (dev == device) {  // another thread mapped it meanwhile: keep one reference
      detail::ipc_close(base);
      return reinterpret_cast<std::uintptr_t>(b) + r.ipc_offset;
    }
  r.ipc_more.emplace_back(device, base);
  return reinterpret_cast<std::uintptr_t>(base) + r.ipc_offset;
}

bool backend::ensure_peer_access(int from, int to) {
  if (from == to || to < 0) return true;
  std::lock_guard lk(st_->mu);
  auto& s = *st_->devs[static_cast<std::size_t>(from)];
  auto& slot = s.peer[static_cast<std::size_t>(to)];
  if (slot != 0) return slot > 0;
  int can = 0;
  NIXL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) {
    slot = -1;
    nixl::log::info(
        "CUDA backend: GPU {} cannot reach GPU {} directly; copies between them go "
        "through the copy engines, staged by the driver",
        from, to);
    return false;
  }
  detail::device_guard g(from);
  // Another backend of this process may have enabled it already.
  NIXL_CUDA_CHECK(
      detail::allow(cudaDeviceEnablePeerAccess(to, 0), cudaErrorPeerAccessAlreadyEnabled));
  slot = 1;
  return true;
}

cudaStream_t backend::take_stream(int device) {
  auto& s = *st_->devs[static_cast<std::size_t>(device)];
  {
    std::lock_guard lk(st_->mu);
    if (s.streams.empty()) {
      detail::device_guard g(device);
      for (unsigned i = 0; i < st_->cfg.streams_per_gpu; ++i) {
        cudaStream_t st = nullptr;
        NIXL_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        s.streams.push_back(st);
      }
    }
  }
  return s.streams[s.next.fetch_add(1, std::memory_order_relaxed) % s.streams.size()];
}

void backend::prepare(request& req, xfer_op op, std::span<const nixl::bound_desc<region>> local,
                      std::span<const nixl::bound_desc<remote_region>> remote, peer& p) {
  if (local.size() != remote.size())
    raise(status::invalid_param, "CUDA backend: {} local descriptors but {} remote ones",
          local.size(), remote.size());
  if (!p.same_host)
    raise(status::not_supported,
          "CUDA backend: agent '{}' runs on host '{}'; the CUDA backend "
          "moves data within one host: use UCX",
          p.agent, p.host);
  (void)release(req);
  request out;
  struct plan {
    int device;
    std::vector<detail::copy_item> small, large;
  };
  std::vector<plan> plans;
  const auto& cfg = st_->cfg;

  for (std::size_t i = 0; i < local.size(); ++i) {
    const auto& l = local[i];
    const auto& r = remote[i];
    if (l.region == nullptr || r.region == nullptr)
      raise(status::invalid_param, "CUDA backend: descriptor {} is not bound to a region", i);
    const region& lr = *l.region;
    const remote_region& rr = *r.region;
    if (l.len != r.len)
      raise(status::invalid_param, "CUDA backend: descriptor {}: local length {} != remote {}", i,
            l.len, r.len);
    if (l.addr < lr.addr || l.len > lr.len || l.addr - lr.addr > lr.len - l.len)
      raise(status::not_found,
            "CUDA backend: local descriptor {} ({} + {}) lies outside its "
            "region ({} + {})",
            i, detail::hex(l.addr), l.len, detail::hex(lr.addr), lr.len);
    if (r.addr < rr.addr || r.len > rr.len || r.addr - rr.addr > rr.len - r.len)
      raise(status::not_found,
            "CUDA backend: remote descriptor {} ({} + {}) lies outside its "
            "region ({} + {})",
            i, detail::hex(r.addr), r.len, detail::hex(rr.addr), rr.len);
    if (rr.reachable != reach::ok) detail::refuse(p, rr);
    if (rr.access == 0)
      raise(status::not_found, "CUDA backend: remote region {} of agent '{}' is not mapped",
            detail::hex(rr.addr), p.agent);
    if (l.len == 0) continue;
    const int dev = exec_device(lr, rr, op);
    const std::uint64_t lp = lr.access + (l.addr - lr.addr);
    const std::uint64_t rp = access_on(rr, dev) + (r.addr - rr.addr);
    const detail::copy_item it =
        op == xfer_op::write ? detail::copy_item{lp, rp, l.len} : detail::copy_item{rp, lp, l.len};
    // The kernel needs both ends reachable from the executing GPU.
    const int other = lr.kind == mem_kind::vram && lr.device == dev ? rr.device : lr.device;
    const bool kernel_ok = cfg.kernel_max_bytes > 0 && l.len <= cfg.kernel_max_bytes &&
                           lr.device_access && rr.device_access && ensure_peer_access(dev, other);
    if (lr.kind == mem_kind::vram && rr.kind == mem_kind::vram)
      (void)ensure_peer_access(dev, other);
    auto pl =
        std::find_if(plans.begin(), plans.end(), [&](const plan& x) { return x.device == dev; });
    if (pl == plans.end()) pl = plans.insert(plans.end(), plan{dev, {}, {}});
    auto& list = kernel_ok ? pl->small : pl->large;
    // Merge with the previous copy when both ends continue it.
    if (!list.empty() && list.back().src + list.back().len == it.src &&
        list.back().dst + list.back().len == it.dst &&
        (!kernel_ok || list.back().len + it.len <= cfg.kernel_max_bytes)) {
      list.back().len += it.len;
    } else {
      list.push_back(it);
    }
    out.bytes += l.len;
  }

  for (auto& pl : plans) {
    detail::lane ln;
    ln.device = pl.device;
    if (!pl.small.empty() && pl.small.size() < cfg.kernel_min_count) {
      pl.large.insert(pl.large.end(), pl.small.begin(), pl.small.end());
      pl.small.clear();
    }
    detail::device_guard g(pl.device);
    if (!pl.small.empty()) {
      std::vector<detail::copy_item> items;
      items.reserve(pl.small.size());
      for (const auto& it : pl.small) detail::append_chunked(items, it);
      void* buf = nullptr;
      NIXL_CUDA_CHECK(cudaMalloc(&buf, items.size() * sizeof(detail::copy_item)));
      ln.items = detail::device_buffer(buf, pl.device);
      NIXL_CUDA_CHECK(cudaMemcpy(buf, items.data(), items.size() * sizeof(detail::copy_item),
                                 cudaMemcpyHostToDevice));
      ln.kernel_count = static_cast<std::uint32_t>(items.size());
      ln.grid =
          detail::copy_grid(items.size(), st_->devs[static_cast<std::size_t>(pl.device)]->sm_count);
    }
    ln.engine = std::move(pl.large);
    cudaEvent_t ev = nullptr;
    NIXL_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ln.done = detail::event_handle(ev);
    ln.stream = take_stream(pl.device);
    out.lanes.push_back(std::move(ln));
  }
  detail::start_datagram(out.datagram, st_->agent);
  out.prefix = out.datagram.size();
  out.datagram.reserve(out.prefix + 256);
  out.target = &p;
  req = std::move(out);
}

nixl::status backend::query_failed(request& req, cudaError_t e) noexcept {
  detail::report_cuda(e, "cudaEventQuery", __FILE__, __LINE__);
  return issue_failed(req);
}

nixl::status backend::issue_failed(request& req) noexcept {
  if (req.notify) {
    for (detail::lane& ln : req.lanes) (void)cudaEventSynchronize(ln.done.get());
    send_abort(req);
  }
  return req.state.end(status::backend);
}

void backend::send_abort(request& req) noexcept {
  if (req.target == nullptr || req.datagram.size() <= detail::notif_kind_at) return;
  req.notify = false;  // once
  req.datagram[detail::notif_kind_at] = detail::notif_kind_abort;
  const int rc = st_->socket.send(req.target->socket, req.datagram);
  req.datagram[detail::notif_kind_at] = 0;
  if (rc != 0) {
    try {
      nixl::log::debug("CUDA backend: abort notice to '{}' not sent: {}", req.target->agent,
                       std::strerror(rc));
    } catch (...) {
    }
  }
}

nixl::status backend::notify_failed(request& req, int err) noexcept {
  (void)req.state.end(status::backend);  // later checks answer `backend`
  try {
    nixl::log::error("CUDA backend: notification to '{}' failed: {}", req.target->agent,
                     std::strerror(err));
  } catch (...) {
  }
  return err == ECONNREFUSED || err == ENOENT ? status::remote_disconnect : status::backend;
}

}  // namespace nixl::cuda
