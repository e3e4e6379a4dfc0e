// The UCX backend's transfers, outside the inline hot path of ucx.hpp: completion slots,
// choosing a worker, prepare (resolving descriptors once), release and estimate.

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx {
namespace detail {

op_slot* engine::acquire_slot() {
  return slots_.acquire([this] {
    auto s = std::make_unique<op_slot>();
    s->owner = this;
    s->notif.reserve(notif_prefix_.size() + 256);
    return s;
  });
}

void engine::release_slot(op_slot* s) noexcept {
  s->reset();
  s->has_notif = false;
  slots_.release(s);
}

bool engine::detach(op_slot* s) noexcept {
  // counted before the slot can be reclaimed, so that orphans_ never goes below zero
  orphans_.fetch_add(1, std::memory_order_acq_rel);
  if (s->detach()) return true;
  orphans_.fetch_sub(1, std::memory_order_acq_rel);
  return false;
}

void engine::reclaim(op_slot* s) noexcept {
  release_slot(s);
  orphans_.fetch_sub(1, std::memory_order_acq_rel);
}

bool engine::posts_on_thread(const peer_state& p, std::uint32_t w, std::size_t ops,
                             bool cma) const noexcept {
  // Calls that would block the caller: UCX's tcp transport sends inside the put call, and
  // copy_cma copies inside post_part.
  return thread_.joinable() &&
         nixl::detail::posts_on_thread(cfg_.post_thread, ops, config::post_thread_ops,
                                       cma || (w < p.tcp_lane.size() && p.tcp_lane[w] != 0));
}

bool engine::queue_post(op_slot* s) noexcept {
  s->post_state.store(post_queued, std::memory_order_release);
  {
    std::lock_guard lk(post_mu_);
    try {
      post_queue_.push_back(s);
    } catch (...) {
      s->post_state.store(post_idle, std::memory_order_relaxed);
      return false;
    }
    posts_queued_.store(true, std::memory_order_seq_cst);
  }
  // An application thread that polls the worker (driven mode) claims the post at its next
  // status check, sooner than a woken thread would be scheduled, and a wake-up would take a
  // core from the threads that move the data; the thread itself looks again within a tick.
  wake_for(s->worker);
  return true;
}

void engine::post_claimed(op_slot* s, status cancel) noexcept {
  peer_state* p = s->peer.load(std::memory_order_relaxed);
  p->handed_posting.fetch_add(1, std::memory_order_seq_cst);
  // a peer whose endpoints close, or that failed: the parts end without touching them
  status why = cancel;
  if (why == status::success && p->no_posts.load(std::memory_order_seq_cst))
    why = status::canceled;
  else if (why == status::success && p->gone())
    why = status::remote_disconnect;
  // a status check that claimed it keeps the progress thread off the worker meanwhile
  const bool app_thread = std::this_thread::get_id() != s->owner->thread_.get_id();
  for (const op_run& pt : s->parts) {
    if (why == status::success) {
      const bulk_post_scope hold(*s->owner, pt.worker, app_thread ? pt.count : 0);
      auto& polls = s->owner->watch_[pt.worker].app_posts;
      if (app_thread) polls.fetch_add(1, std::memory_order_relaxed);
      post_part(s, pt, s->write);
      if (app_thread) polls.fetch_sub(1, std::memory_order_relaxed);
    } else {
      s->fail(why);
      flush_done(s);
    }
  }
  p->handed_posting.fetch_sub(1, std::memory_order_seq_cst);
  s->post_state.store(post_idle, std::memory_order_release);  // its descriptors are not read now
  flush_done(s);                                              // the posting count
}

void engine::run_queued_posts(bool fail) noexcept {
  {
    std::lock_guard lk(post_mu_);
    posting_.swap(post_queue_);
    posts_queued_.store(false, std::memory_order_relaxed);
  }
  // An entry whose post another thread claimed is stale: that slot may be queued again, by
  // then with an entry of its own, so whichever entry comes first posts it.
  for (op_slot* s : posting_)
    if (claim_post(s)) post_claimed(s, fail ? status::canceled : status::success);
  posting_.clear();
}

void engine::wait_posted(const op_slot* s) noexcept {
  while (s->post_state.load(std::memory_order_acquire) != post_idle) std::this_thread::yield();
}
}  // namespace detail

void backend::prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer& p) {
  prepare(r, op, local, remote, p, {});
}

namespace {
// `worker_id=N` in NIXL's customParam: items separated by commas, spaces or semicolons; other
// items are left to other backends.
std::optional<std::uint32_t> custom_worker(std::string_view custom, std::size_t workers) {
  std::optional<std::uint32_t> w;
  while (!custom.empty()) {
    const auto cut = custom.find_first_of(", ;");
    const std::string_view item = custom.substr(0, cut);
    custom = cut == std::string_view::npos ? std::string_view{} : custom.substr(cut + 1);
    constexpr std::string_view key = "worker_id=";
    if (item.substr(0, key.size()) != key) continue;
    const std::string_view v = item.substr(key.size());
    std::uint32_t n = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || ptr != v.data() + v.size() || n >= workers)
      raise(status::invalid_param,
            "UCX prepare: custom parameter '{}': this backend has {} worker(s); use worker_id=0 "
            "to {} (or set num_workers / num_threads)",
            item, workers, workers - 1);
    w = n;
  }
  return w;
}

// UCX's cuda_ipc mapping cache off: every ucp_rkey_ptr would map the peer's VRAM anew and keep
// it (the key has no release), so the peer-process pairs then stay with UCX.
bool ipc_cache_off(std::string_view engine_config) {
  auto off = [](std::string_view v) {
    return v == "n" || v == "no" || v == "0" || v == "off" || v == "N" || v == "NO";
  };
  if (const char* e = std::getenv("UCX_CUDA_IPC_CACHE"); e != nullptr && off(e)) return true;
  for (std::string_view key : {"UCX_CUDA_IPC_CACHE=", "CUDA_IPC_CACHE="}) {
    const auto at = engine_config.find(key);
    if (at == std::string_view::npos) continue;
    std::string_view v = engine_config.substr(at + key.size());
    v = v.substr(0, v.find(','));
    if (off(v)) return true;
  }
  return false;
}

/// What `host_vram_pair` found for the last pair of regions of a prepare: descriptors of the
/// same two regions reuse it (one mapping, one device lookup and one pin per region pair).
struct host_vram_regions {
  const backend::region* local = nullptr;
  const backend::remote_region* remote = nullptr;
  bool usable = false;
  /// Opened from the peer's CUDA IPC export (the request keeps it), and its device.
  std::shared_ptr<detail::ipc_mapping> map;
  std::optional<detail::gpu::located> mapped;
  char* remote_base = nullptr;  ///< where the remote region starts in this process
  detail::gpu::located loc;
};

// A DRAM <-> VRAM pair that the CUDA driver can copy here (`host_vram_copy=cuda`): the peer is
// this agent or one of this process (both addresses valid here), or another process of this
// host whose VRAM is mapped here (UCX's cuda_ipc key, else the CUDA IPC handle the peer
// exported) while the DRAM is local. Pins the DRAM region
// on first use. Nothing: the pair stays with UCX.
std::optional<detail::gpu_item> host_vram_pair(xfer_op op, const bound_desc<backend::region>& l,
                                               const bound_desc<backend::remote_region>& rm,
                                               const detail::peer_state& peer, std::uint32_t w,
                                               bool map_peer, host_vram_regions& last) {
  const bool local_dram = l.region->kind == mem_kind::dram;
  if (local_dram == (rm.region->kind == mem_kind::dram)) return std::nullopt;
  if (last.local != l.region || last.remote != rm.region) {
    last = {l.region, rm.region};
    const desc& rr = rm.region->range;
    const bool same_process = peer.is_self || peer.local_alive != nullptr;
    void* base = nullptr;
    if (same_process) {
      base = reinterpret_cast<void*>(rr.addr);
    } else if (!local_dram) {
      // The peer's host memory, where UCX maps it here (its shared-memory key: memory the
      // peer's UCX allocated, e.g. backend::allocate), pinned for the driver.
      if (rm.region->host_map && w < rm.region->rkeys.size()) {
        detail::host_map_slot& slot = *rm.region->host_map;
        std::lock_guard lk(slot.mu);
        if (!slot.tried) {
          slot.tried = true;
          void* p = nullptr;
          if (ucp_rkey_ptr(rm.region->rkeys[w].get(), rr.addr, &p) == UCS_OK && p != nullptr) {
            slot.base = static_cast<char*>(p);
            slot.len = rr.len;
            detail::gpu::pin(reinterpret_cast<std::uintptr_t>(p), rr.len, l.region->range.dev);
          }
        }
        base = slot.base;
      }
      if (base == nullptr)
        log::debug(
            "UCX prepare: VRAM here, host memory of '{}' in another process that UCX does not "
            "map here",
            peer.name);
    } else if (!map_peer) {
      log::debug("UCX prepare: UCX_CUDA_IPC_CACHE is off: DRAM -> VRAM of '{}' stays with UCX",
                 peer.name);
    } else if (peer.pidfd < 0) {
      log::debug(
          "UCX prepare: '{}' is not known to share this host (error mode other than auto, or "
          "another host): DRAM <-> its VRAM stays with UCX",
          peer.name);
    } else {
      // UCX's own mapping where its endpoint unpacked the cuda_ipc key (an endpoint with a
      // cuda_ipc lane), else the CUDA IPC handle the peer exported with the region.
      if (w < rm.region->rkeys.size())
        base = detail::gpu::map_remote(rm.region->rkeys[w].get(), rr.addr, rr.dev);
      if (base == nullptr && rm.region->ipc) {
        detail::ipc_slot& slot = *rm.region->ipc;
        std::lock_guard lk(slot.mu);
        if (!slot.tried) {
          slot.tried = true;
          slot.map = detail::gpu::open_ipc(slot.x);
        }
        if (slot.map) {
          const auto m = detail::gpu::where(*slot.map);
          base = m.base + slot.x.offset;
          last.map = slot.map;
          last.mapped = m.loc;
        }
      }
      if (base == nullptr)
        log::debug("UCX prepare: the VRAM of '{}' at {:#x} cannot be mapped here: stays with UCX",
                   peer.name, rr.addr);
    }
    if (base == nullptr) return std::nullopt;
    const std::uint64_t dev = local_dram ? rr.dev : l.region->range.dev;
    const auto loc =
        last.mapped ? last.mapped
                    : detail::gpu::locate(
                          local_dram ? base : reinterpret_cast<void*>(l.region->range.addr), dev);
    if (!loc) {
      log::debug("UCX prepare: no CUDA device found for the VRAM of this pair: stays with UCX");
      return std::nullopt;
    }
    log::debug("UCX prepare: DRAM <-> VRAM of '{}' through the CUDA driver ({})", peer.name,
               same_process  ? "this process"
               : !local_dram ? "the peer's host memory mapped through UCX's shared-memory key"
               : last.mapped ? "the peer's VRAM opened from its CUDA IPC export"
                             : "the peer's VRAM mapped through UCX's cuda_ipc key");
    const desc& host = local_dram ? l.region->range : rr;
    detail::gpu::pin(host.addr, host.len, dev);
    last.usable = true;
    last.remote_base = static_cast<char*>(base);
    last.loc = *loc;
  }
  if (!last.usable) return std::nullopt;
  void* remote = last.remote_base + (rm.addr - rm.region->range.addr);
  void* here = reinterpret_cast<void*>(l.addr);
  const bool write = op == xfer_op::write;
  return detail::gpu_item{write ? remote : here, write ? here : remote, l.len, last.loc.ctx,
                          last.loc.stream};
}

}  // namespace

void backend::prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer& p,
                      std::string_view custom) {
  if (p.state == nullptr || p.state->closed)
    raise(status::not_found, "UCX prepare: the peer is not loaded");
  if (local.size() != remote.size())
    raise(status::invalid_param, "UCX prepare: {} local descriptors but {} remote ones",
          local.size(), remote.size());
  if (r.slot_ != nullptr && r.slot_->busy())
    raise(status::repost_active, "UCX prepare: the request is still in flight");
  const auto nw = static_cast<std::uint32_t>(eng_->num_workers());
  const std::uint32_t w = custom_worker(custom, nw).value_or(eng_->next_worker());
  // split_batch_size: chunks of that many descriptors, on workers w, w+1, ...
  const std::size_t split = eng_->cfg().split_batch_size;
  const bool chunked = split > 0 && nw > 1 && local.size() > split;
  detail::item_vector items;
  std::vector<detail::gpu_item> gpu;
  std::vector<std::shared_ptr<detail::ipc_mapping>> maps;
  std::vector<detail::wire::copy_entry> copies;
  void* copy_vram = nullptr;  // the first, and whether all are on its GPU
  std::uint64_t copy_dev = 0;
  bool copy_one_gpu = true;
  std::vector<chunk> chunks;
  items.reserve(local.size());
  const bool cuda_path = NIXL_UCX_WITH_CUDA != 0 && eng_->cfg().cuda_host_vram;
  const bool map_peer = cuda_path && !ipc_cache_off(eng_->cfg().engine_config);
  host_vram_regions last_pair;
  // every pair UCX would move is DRAM <-> DRAM of a cma peer: this process copies them
  bool cma = p.state->cma_pid != 0;
  for (std::size_t i = 0; i < local.size(); ++i) {
    const bound_desc<region>& l = local[i];
    const bound_desc<remote_region>& rm = remote[i];
    if (l.region == nullptr || rm.region == nullptr)
      raise(status::invalid_param, "UCX prepare: descriptor {} is not bound to a region", i);
    if (l.len != rm.len)
      raise(status::invalid_param,
            "UCX prepare: descriptor {}: local length {} != remote length {}", i, l.len, rm.len);
    if (!l.region->range.covers(l))
      raise(status::invalid_param,
            "UCX prepare: local descriptor {} [{:#x}, +{}) lies outside its registered region "
            "[{:#x}, +{})",
            i, l.addr, l.len, l.region->range.addr, l.region->range.len);
    if (rm.region->peer != p.state)
      raise(status::invalid_param,
            "UCX prepare: remote descriptor {} belongs to agent '{}', not to '{}'", i,
            rm.region->peer ? rm.region->peer->name : std::string("?"), p.state->name);
    if (!rm.region->range.covers(rm))
      raise(status::invalid_param,
            "UCX prepare: remote descriptor {} [{:#x}, +{}) lies outside the region [{:#x}, +{}) "
            "that '{}' registered",
            i, rm.addr, rm.len, rm.region->range.addr, rm.region->range.len, p.state->name);
    if (l.len == 0) continue;
    if (cuda_path) {
      if (auto g = host_vram_pair(op, l, rm, *p.state, w, map_peer, last_pair)) {
        gpu.push_back(*g);
        if (last_pair.map && (maps.empty() || maps.back() != last_pair.map))
          maps.push_back(last_pair.map);
        continue;
      }
      // VRAM here, host memory of a peer process that runs copy requests: the peer copies
      if (l.region->kind == mem_kind::vram && rm.region->kind == mem_kind::dram &&
          p.state->pidfd >= 0 && p.state->host_copies && l.region->ipc) {
        const detail::ipc_export& x = *l.region->ipc;
        detail::wire::copy_entry e;
        e.handle = x.handle;
        e.uuid = x.uuid;
        e.vram_offset = x.offset + (l.addr - l.region->range.addr);
        e.alloc_len = x.alloc_len;
        e.host_addr = rm.addr;
        e.len = l.len;
        if (copies.empty()) {
          copy_vram = reinterpret_cast<void*>(l.addr);
          copy_dev = l.region->range.dev;
        }
        copy_one_gpu = copy_one_gpu && (copies.empty() || copies.front().uuid == e.uuid);
        copies.push_back(e);
        continue;
      }
    }
    std::uint32_t cw = w;
    if (chunked) {
      const std::size_t k = items.size() / split;  // chunk of this item
      cw = static_cast<std::uint32_t>((w + k) % nw);
      if (chunks.size() == k) {
        const auto at = static_cast<std::uint32_t>(items.size());
        chunks.push_back({at, at, p.state->eps[cw], cw});
      }
      ++chunks.back().end;
    }
    cma = cma && l.region->kind == mem_kind::dram && rm.region->kind == mem_kind::dram;
    items.push_back({reinterpret_cast<void*>(l.addr), l.len, rm.addr, rm.region->rkeys[cw].get(),
                     l.region->memh.get()});
  }
  if (chunks.size() == 1) chunks.clear();
  // cma calls for the small blocks, UCX's shared-memory protocol for those of shm_min_size and
  // more (one chunk each, small first; one request, one notification after both)
  const std::size_t shm_min = eng_->cfg().shm_min_size;
  const auto small = [shm_min](const detail::xfer_item& it) { return it.len < shm_min; };
  const bool shm =
      cma && p.state->shm && chunks.empty() && !std::all_of(items.begin(), items.end(), small);
  if (shm) {
    const auto k = static_cast<std::uint32_t>(
        std::stable_partition(items.begin(), items.end(), small) - items.begin());
    const auto n = static_cast<std::uint32_t>(items.size());
    if (k == 0)
      cma = false;  // all of them through UCX
    else
      chunks = {{0, k, p.state->eps[w], w, false}, {k, n, p.state->eps[w], w, true}};
  }
  if (r.slot_ == nullptr) r.slot_ = eng_->acquire_slot();
  r.slot_->peer.store(p.state, std::memory_order_relaxed);
  r.items_ = std::move(items);
  r.gpu_ = std::move(gpu);
  r.gpu_maps_ = std::move(maps);
  r.copies_ = copies.size();
  // the peer answers once its copies are issued, with their events, where both sides can (and
  // the events are opened in the context of the one GPU of this request's VRAM)
  r.copy_ctx_ = nullptr;
  if (!copies.empty() && copy_one_gpu && detail::gpu_ipc_events())
    if (const auto loc = detail::gpu::locate(copy_vram, copy_dev)) r.copy_ctx_ = loc->ctx;
  r.copy_msg_ = copies.empty() ? std::string()
                               : detail::wire::encode_copy_request(op == xfer_op::write, copies,
                                                                   r.copy_ctx_ != nullptr);
  if (!copies.empty())
    log::debug("UCX prepare: {} pair(s) of VRAM here and host memory of '{}' copied by the peer",
               copies.size(), p.state->name);
  r.chunks_ = std::move(chunks);
  r.peer_ = p.state;
  r.ep_ = p.state->eps[w];
  r.worker_ = w;
  r.op_ = op;
  r.cma_pid_ = cma && !r.items_.empty() ? p.state->cma_pid : 0;
  // cma calls and UCX's shared-memory protocol both copy inside the post call
  r.on_thread_ = eng_->posts_on_thread(*p.state, w, r.items_.size(), r.cma_pid_ != 0 || shm);
}

bool backend::queue_parts(request& r) noexcept {
  detail::op_slot* s = r.slot_;
  try {
    s->parts.clear();  // its capacity stays with the slot
    if (r.chunks_.empty()) {
      s->parts.push_back(run_of(r, whole(r)));
    } else {
      for (const chunk& c : r.chunks_) s->parts.push_back(run_of(r, c));
    }
  } catch (...) {
    return false;
  }
  s->write = r.op_ == xfer_op::write;
  return eng_->queue_post(s);
}

status backend::release(request& r) noexcept {
  detail::op_slot* s = r.slot_;
  if (s == nullptr) return status::success;
  // A post still queued for the progress thread is canceled here, before UCX sees any of it;
  // one being made ends first (the request's descriptors stay until then).
  if (detail::engine::claim_post(s))
    detail::engine::post_claimed(s, status::canceled);
  else
    detail::engine::wait_posted(s);
  if (s->busy()) {
    // UCX cannot cancel one-sided operations (ucp_request_cancel ignores them). Most end within
    // microseconds: progress for a short grace, then abandon the rest to the engine, which
    // keeps the slot, its notification bytes and the registrations UCX may still use.
    const auto deadline = std::chrono::steady_clock::now() + detail::engine::release_grace;
    while (s->busy() && !r.peer_->failed.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      eng_->poll(r.worker_, r.peer_);
      for (const chunk& c : r.chunks_)
        if (c.worker != r.worker_) eng_->poll(c.worker, nullptr);
    }
    // The driver's copies cannot be taken back: they end before release returns, so that no
    // byte of them lands afterwards.
    if (s->busy()) eng_->wait_gpu(s);
  }
  if (!eng_->detach(s)) eng_->release_slot(s);
  r.slot_ = nullptr;
  r.items_.clear();
  r.gpu_.clear();
  r.gpu_maps_.clear();
  r.copy_msg_.clear();
  r.copies_ = 0;
  r.chunks_.clear();
  r.cma_pid_ = 0;
  return status::success;
}

std::optional<std::chrono::microseconds> backend::estimate(const request& r) const {
  // UCX cannot estimate the descriptors the CUDA driver copies (host_vram_copy=cuda)
  if (r.ep_ == nullptr || !r.gpu_.empty()) return std::nullopt;
  double seconds = 0;
  for (const detail::xfer_item& it : r.items_) {
    ucp_ep_evaluate_perf_param_t pp{};
    pp.field_mask = UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE;
    pp.message_size = it.len;
    ucp_ep_evaluate_perf_attr_t pa{};
    pa.field_mask = UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME;
    if (ucp_ep_evaluate_perf(r.ep_, &pp, &pa) != UCS_OK) return std::nullopt;
    seconds += pa.estimated_time;
  }
  return std::chrono::microseconds(static_cast<std::int64_t>(seconds * 1e6 + 0.999));
}

}  // namespace nixl::ucx
