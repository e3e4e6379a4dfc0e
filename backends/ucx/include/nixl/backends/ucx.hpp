#pragma once
/// `nixl::ucx::backend`: DRAM (and, where UCX has CUDA, VRAM) transfers between agents of one
/// or several processes over UCX, with notifications, a progress thread and peer failure
/// detection. NIXL's backend name "UCX". See docs/ucx.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ucp/api/ucp.h>

#include <nixl/backends/ucx/detail/engine.hpp>
#include <nixl/backends/ucx/detail/gpu.hpp>
#include <nixl/backends/ucx/detail/ucs.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/backend_checks.hpp>
#include <nixl/detail/peer_ref.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

/// 1 when the UCX build has CUDA transports (set by CMake from UCX's modules); VRAM transfers
/// are then chosen for UCX at compile time. Registration still checks what the library reports.
#ifndef NIXL_UCX_WITH_CUDA
#define NIXL_UCX_WITH_CUDA 0
#endif

namespace nixl::ucx {

/// Memory that UCX allocated and registered (`backend::allocate`). On one host peers reach it
/// through shared memory directly, without the target's help: the fastest DRAM path of UCX 1.13.
/// Register it with the agent as usual; deregister it before this object goes away.
class memory {
 public:
  memory() = default;
  memory(memory&& o) noexcept
      : eng_(std::exchange(o.eng_, nullptr)),
        addr_(std::exchange(o.addr_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  memory& operator=(memory&& o) noexcept {
    if (this != &o) {
      memory tmp(std::move(*this));
      eng_ = std::exchange(o.eng_, nullptr);
      addr_ = std::exchange(o.addr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~memory();
  std::byte* data() const noexcept { return static_cast<std::byte*>(addr_); }
  std::uintptr_t addr() const noexcept { return reinterpret_cast<std::uintptr_t>(addr_); }
  std::size_t size() const noexcept { return size_; }

 private:
  friend class backend;
  memory(detail::engine* e, void* a, std::size_t n) noexcept : eng_(e), addr_(a), size_(n) {}
  detail::engine* eng_ = nullptr;
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

/// The UCX backend. Moves DRAM between agents (and to itself), over shared memory, cma or TCP
/// as UCX chooses; refuses VRAM at registration unless the UCX library reports CUDA support.
class backend {
 public:
  static constexpr std::string_view name = "UCX";
  using memory_kinds = kind_list<dram_t, vram_t>;
  using config = ucx::config;

  /// DRAM <-> DRAM always; VRAM only with a UCX built with CUDA, so that an agent that also has
  /// nixl::cuda::backend picks that one for VRAM on a UCX without CUDA.
  static constexpr bool can_move(mem_kind local, mem_kind remote) noexcept {
    if (local == mem_kind::dram && remote == mem_kind::dram) return true;
    return NIXL_UCX_WITH_CUDA != 0 && (local == mem_kind::dram || local == mem_kind::vram) &&
           (remote == mem_kind::dram || remote == mem_kind::vram);
  }

  /// The params this backend advertises, with their defaults.
  static params default_params();

  /// A registered local region: its UCX memory handle and packed remote key.
  struct region {
    detail::mem_handle memh;
    desc range{};
    mem_kind kind = mem_kind::dram;
    std::string public_data;  ///< framed packed rkey, what peers unpack
    /// VRAM: the CUDA IPC export of its allocation (also in `public_data`), when it has one.
    std::optional<detail::ipc_export> ipc;
  };

  /// A peer's region as seen from here: one unpacked rkey per local worker.
  struct remote_region {
    desc range{};
    mem_kind kind = mem_kind::dram;
    detail::peer_state* peer = nullptr;
    std::vector<detail::rkey_handle> rkeys;
    /// VRAM of another process: its CUDA IPC export (from its region data), and the mapping
    /// opened here at the first DRAM <-> VRAM prepare that uses it.
    std::shared_ptr<detail::ipc_slot> ipc;
    /// DRAM of another process of this host, as mapped here for the driver's copies.
    std::shared_ptr<detail::host_map_slot> host_map;
  };

  /// A remote agent (or this agent, for loopback): its endpoints, one per local worker.
  using peer = nixl::detail::peer_ref<detail::peer_state>;

  /// A run of a request's descriptors posted on one worker (`split_batch_size`).
  struct chunk {
    std::uint32_t begin = 0, end = 0;
    ucp_ep_h ep = nullptr;
    std::uint32_t worker = 0;
    bool ucx = false;  ///< UCX moves these items even where cma calls move the rest
  };

  /// Everything a transfer needs, resolved by `prepare`.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept
        : items_(std::move(o.items_)),
          gpu_(std::move(o.gpu_)),
          gpu_maps_(std::move(o.gpu_maps_)),
          copy_msg_(std::move(o.copy_msg_)),
          copies_(o.copies_),
          copy_ctx_(std::exchange(o.copy_ctx_, nullptr)),
          chunks_(std::move(o.chunks_)),
          slot_(std::exchange(o.slot_, nullptr)),
          peer_(std::exchange(o.peer_, nullptr)),
          ep_(std::exchange(o.ep_, nullptr)),
          worker_(o.worker_),
          op_(o.op_),
          on_thread_(o.on_thread_),
          cma_pid_(o.cma_pid_) {}
    request& operator=(request&& o) noexcept {
      items_ = std::move(o.items_);
      gpu_ = std::move(o.gpu_);
      gpu_maps_ = std::move(o.gpu_maps_);
      copy_msg_ = std::move(o.copy_msg_);
      copies_ = o.copies_;
      copy_ctx_ = std::exchange(o.copy_ctx_, nullptr);
      chunks_ = std::move(o.chunks_);
      slot_ = std::exchange(o.slot_, nullptr);
      peer_ = std::exchange(o.peer_, nullptr);
      ep_ = std::exchange(o.ep_, nullptr);
      worker_ = o.worker_;
      op_ = o.op_;
      on_thread_ = o.on_thread_;
      cma_pid_ = o.cma_pid_;
      return *this;
    }
    /// Number of descriptor pairs UCX will see.
    std::size_t size() const noexcept { return items_.size(); }
    /// Number of descriptor pairs the CUDA driver copies instead (`host_vram_copy=cuda`).
    std::size_t gpu_copies() const noexcept { return gpu_.size(); }
    /// Number of descriptor pairs the peer copies for this request (its host memory <-> this
    /// process's VRAM: a copy request, answered before the rest of the request goes).
    std::size_t peer_copies() const noexcept { return copies_; }
    /// Index of the worker this request runs on (its first chunk's, when split).
    std::uint32_t worker() const noexcept { return worker_; }
    /// Workers the request is split over (1 unless `split_batch_size` applies).
    std::size_t chunks() const noexcept { return chunks_.empty() ? 1 : chunks_.size(); }
    /// True when the progress thread posts this request's operations, so that post returns at
    /// once (`post_thread`: many operations, or a TCP lane).
    bool posted_on_thread() const noexcept { return on_thread_; }
    /// True when this process copies the request's DRAM itself, with process_vm_writev/readv
    /// calls into (or out of) the peer process (`host_dram_copy=cma`; UCX then sends only the
    /// notification).
    bool cma_copies() const noexcept { return cma_pid_ != 0; }

   private:
    friend class backend;
    detail::item_vector items_;
    /// DRAM <-> VRAM pairs of this host that the CUDA driver copies at post, before UCX's part.
    std::vector<detail::gpu_item> gpu_;
    /// The peers' VRAM mappings those copies use (kept while the request is prepared).
    std::vector<std::shared_ptr<detail::ipc_mapping>> gpu_maps_;
    std::string copy_msg_;       ///< the copy request for the peer's copies (empty: none)
    std::size_t copies_ = 0;     ///< descriptor pairs in it
    void* copy_ctx_ = nullptr;   ///< the CUDA context of its VRAM (where answers are waited on)
    std::vector<chunk> chunks_;  ///< empty: one chunk, all items on `worker_`
    detail::op_slot* slot_ = nullptr;
    detail::peer_state* peer_ = nullptr;
    ucp_ep_h ep_ = nullptr;
    std::uint32_t worker_ = 0;
    xfer_op op_ = xfer_op::write;
    bool on_thread_ = false;
    int cma_pid_ = 0;  ///< the peer's pid when copy_cma moves the items, else 0
  };

  /// Creates the UCX context, workers and (unless disabled) the progress thread.
  /// Throws `nixl::error` when UCX cannot be set up or a parameter is bad.
  backend(const config& cfg, const backend_context& ctx);
  backend(backend&&) noexcept = default;
  backend& operator=(backend&&) noexcept = default;
  ~backend() = default;

  /// Registers DRAM (or VRAM where UCX supports CUDA). Throws `nixl::error` otherwise.
  region register_region(mem_kind kind, const reg_desc& d);
  void deregister_region(region& r) noexcept;

  /// Resolves a transfer once; throws `nixl::error(invalid_param)` for a descriptor outside its
  /// region or a region of another peer.
  void prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer& p);
  /// The same, with NIXL's `customParam` (`xfer_options::custom`): `worker_id=N` puts the
  /// request on worker N.
  void prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer& p, std::string_view custom);
  /// Starts a prepared transfer; the notification, if any, is sent once the data is visible.
  status post(request& r, notif_arg notif) noexcept;
  /// `success`, `in_progress` or an error (`remote_disconnect` when the peer died).
  status check(request& r) noexcept;
  /// Where the request stands, without progressing anything (request::wait after a wake-up).
  status peek(const request& r) const noexcept;
  /// True when the progress thread finishes requests and signals the agent's waker: without it
  /// completions are learnt inside check(), and request::wait re-checks at intervals.
  bool wakes_waiters() const noexcept { return eng_->has_progress_thread(); }
  /// The calling thread stops progressing `r`'s worker (request::wait goes to sleep): the
  /// progress thread takes the worker back now rather than after the driven window.
  void hand_back(const request& r) noexcept { eng_->hand_back(r.worker_); }
  /// Frees the request. A request in flight gets `engine::release_grace` (20 ms) to end; then
  /// it is abandoned (UCX cannot cancel one-sided operations): no notification goes out (an
  /// abort notice once UCX is done with the data, if it carried one), its completion is not
  /// reported, and the backend keeps what UCX still uses (the completion slot, the
  /// notification bytes, the registrations) until UCX is done. Always `success`.
  status release(request& r) noexcept;
  /// UCX's estimate of the transfer time (`ucp_ep_evaluate_perf`), summed over descriptors.
  std::optional<std::chrono::microseconds> estimate(const request& r) const;

  // loopback
  peer self_peer();
  remote_region load_local(const region& r);
  void unload_region(remote_region& r) noexcept;

  // remote
  /// This agent's UCX worker addresses and process identity.
  std::string connection_info() const;
  /// Creates endpoints to a peer (no network traffic yet). Throws on malformed input.
  peer load_peer(std::string_view agent, std::span<const std::byte> conn_info);
  /// Which incarnation of its agent connection info comes from (the process image), 0 when the
  /// bytes do not say: new connection info of another incarnation is a restart.
  static std::uint64_t incarnation(std::span<const std::byte> conn_info) noexcept;
  void unload_peer(peer& p) noexcept;
  /// Wires endpoints up now instead of at the first transfer. Throws when the peer is gone.
  void connect(peer& p);
  std::string public_data(const region& r) const;
  remote_region unpack(peer& p, mem_kind kind, const desc& d, std::span<const std::byte> data);

  // notifications
  /// Sends a standalone notification (no ordering with transfers). Throws when the peer failed.
  void notify(peer& p, std::string_view msg);
  /// Appends the notifications received so far (sender agent name -> messages).
  void take_notifications(notif_map& out);
  /// Appends the abort notices received so far: the notifications of peers' requests that
  /// ended without success (sent instead of the notification once UCX is done with the data).
  void take_aborts(notif_map& out);
  /// Appends the names of the agents this backend found gone: loaded peers, and agents that only
  /// sent to this one (an agent says hello to a peer of its host when it loads the peer, and
  /// sends beats to one of another host; the peer watches it by them); each until that name
  /// comes back. `gone_events` counts the findings.
  void gone_agents(std::vector<std::string>& out);
  std::uint64_t gone_events() const noexcept;
  /// Called by the agent as it is destroyed: unloading its peers then tells them nothing (they
  /// are to find it gone), where an invalidation tells a peer of another host that the beats
  /// stop.
  void agent_closing() noexcept;

  /// Progresses every worker once and checks watched peers; for users who run without the
  /// progress thread. The target of a transfer must progress: UCX 1.13 emulates put/get on
  /// ordinary memory with active messages that the target handles.
  void progress() noexcept;

  /// Allocates `bytes` of DRAM through UCX (`UCP_MEM_MAP_ALLOCATE`), registered with this
  /// backend. Regions registered inside it reuse that registration.
  memory allocate(std::size_t bytes);

  /// True when a progress thread drives the workers.
  bool has_progress_thread() const noexcept { return eng_->has_progress_thread(); }
  /// True when the UCX library can register CUDA memory.
  bool cuda_supported() const noexcept { return eng_->cuda_supported(); }
  /// The effective configuration.
  const config& configuration() const noexcept { return eng_->cfg(); }
  /// UCX's description of the endpoint to `p` on worker 0 (lanes and transports).
  std::string endpoint_info(const peer& p) const;
  /// Deregistered memory handles and released rkeys the backend keeps because UCX may still use
  /// them (a released request in flight, a request in flight to a peer that failed in UCX mode
  /// `none`); they go when UCX is done, at the latest with the backend. A diagnostic.
  std::size_t kept_handles() const noexcept { return eng_->kept_handles(); }
  /// How many times application threads progressed worker `w` (status checks, progress()):
  /// while it changes, the progress thread leaves the worker to them. A diagnostic.
  std::uint32_t worker_polls(std::uint32_t w) const noexcept { return eng_->worker_polls(w); }
  /// Whether the progress thread holds worker `w` in driven mode now (application threads
  /// progress it; a post does not wake the thread). A diagnostic.
  bool worker_driven(std::uint32_t w) const noexcept { return eng_->worker_driven(w); }
  /// While `on`, the progress thread leaves the posts handed to it queued (post_thread): a status
  /// check of the request or its release takes them. A diagnostic, for tests of that hand-over.
  void hold_thread_posts(bool on) noexcept { eng_->hold_posts(on); }
  /// How many of this backend's copy requests the peer answered once their copies were issued
  /// (with the events after them, waited on here), rather than once they ended. A diagnostic.
  std::uint64_t peer_copies_issued() const noexcept { return eng_->peer_copies_issued(); }
  /// True once `p` is known to be gone.
  static bool peer_failed(const peer& p) noexcept { return p.failed(); }

 private:
  /// The request's one chunk when it has no chunk list.
  static chunk whole(const request& r) noexcept {
    return {0, static_cast<std::uint32_t>(r.items_.size()), r.ep_, r.worker_};
  }
  /// The operations of chunk `c` of `r`: its items, endpoint, and who copies them.
  static detail::op_run run_of(const request& r, const chunk& c) noexcept {
    return {r.items_.data() + c.begin, c.end - c.begin, c.ep, c.worker, c.ucx ? 0 : r.cma_pid_};
  }
  status post_chunk(request& r, const chunk& c) noexcept;
  /// Hands the request's chunks to the progress thread (request::posted_on_thread); false when
  /// it cannot take them, and the caller posts them itself.
  bool queue_parts(request& r) noexcept;
  std::unique_ptr<detail::engine> eng_;
};

// Hot path

inline status backend::post(request& r, notif_arg notif) noexcept {
  detail::op_slot* s = r.slot_;
  if (s == nullptr) return status::invalid_param;
  if (s->busy()) return status::repost_active;
  if (r.peer_->gone()) return status::remote_disconnect;
  s->has_notif = notif.has_value();
  if (notif) {
    const std::string& prefix = eng_->notif_prefix();
    if (notif->size() > detail::engine::max_notif_size) return status::invalid_param;
    // assign() reuses the slot's capacity (reserved at prepare); only a longer message allocates
    s->notif.assign(prefix);
    s->notif.append(notif->data(), notif->size());
  }
  s->ep = r.ep_;
  s->worker = r.worker_;
  const std::size_t nchunks = r.chunks_.empty() ? 1 : r.chunks_.size();
  const bool copy = !r.copy_msg_.empty();
  const bool gpu = !r.gpu_.empty();
  // One count per chunk's flush, one per put/get UCX keeps, one for the peer's answer to a
  // copy request, one for this host's driver copies, and one held while posting (so that no
  // callback can end the request before every operation of it is counted).
  s->flushes.store(static_cast<int>(nchunks) + 1 + (copy ? 1 : 0) + (gpu ? 1 : 0),
                   std::memory_order_relaxed);
  s->failure.store(0, std::memory_order_relaxed);
  s->start();
  // DRAM <-> VRAM of this host: the driver copies while UCX moves the rest; the notification
  // goes out once both are done.
  if (gpu) eng_->gpu_start(s, r.gpu_);
  // VRAM here and host memory of the peer: the peer copies, and answers while this request's
  // puts move the rest; the notification goes out once both are done.
  if (copy) eng_->delegate_copy(s, r.peer_, r.worker_, r.copy_msg_, r.copy_ctx_);

  if (r.on_thread_ && queue_parts(r)) return status::in_progress;
  if (r.chunks_.empty()) {
    post_chunk(r, whole(r));
  } else {
    for (const chunk& c : r.chunks_) post_chunk(r, c);
  }
  const status st = detail::engine::flush_done(s);  // drops the posting count
  if (st == status::in_progress) {
    if (r.chunks_.empty()) {
      eng_->kick(r.worker_);
    } else {
      for (const chunk& c : r.chunks_) eng_->kick(c.worker);
    }
  }
  return st;
}

// Puts (or gets) of one chunk and the flush of its endpoint (engine::post_part), with the
// progress thread kept off the worker while a chunk of many operations is posted.
inline status backend::post_chunk(request& r, const chunk& c) noexcept {
  const detail::engine::bulk_post_scope hold(*eng_, c.worker, c.end - c.begin);
  return detail::engine::post_part(r.slot_, run_of(r, c), r.op_ == xfer_op::write);
}

inline status backend::check(request& r) noexcept {
  detail::op_slot* s = r.slot_;
  if (s == nullptr) return status::invalid_param;
  const detail::phase st = s->state();
  if (st == detail::phase::idle) return status::not_posted;
  if (st == detail::phase::busy) {
    if (r.peer_->failed.load(std::memory_order_acquire)) return status::remote_disconnect;
    // Handed to the progress thread and not yet made: posted here (a thread that polls makes
    // it at once instead of waiting for the progress thread to be scheduled); being made by the
    // thread: progressing its worker now would only slow that down, but the poll still counts
    // (the worker stays driven, and the next post wakes no thread).
    if (s->post_state.load(std::memory_order_relaxed) != detail::engine::post_idle) [[unlikely]] {
      if (!detail::engine::claim_post(s)) {
        eng_->note_user_poll(r.worker_);
        return status::in_progress;
      }
      detail::engine::post_claimed(s, status::success);
    }
    if (const auto d = s->copy_deadline_ns.load(std::memory_order_relaxed); d != 0) [[unlikely]]
      if (std::chrono::steady_clock::now().time_since_epoch() > std::chrono::nanoseconds(d))
        eng_->expire_copy(s);
    eng_->poll(r.worker_, r.peer_);
    for (const chunk& c : r.chunks_)
      if (c.worker != r.worker_) eng_->poll(c.worker, nullptr);
    if (s->busy())
      return r.peer_->failed.load(std::memory_order_acquire) ? status::remote_disconnect
                                                             : status::in_progress;
  }
  // Every put or get UCX keeps reports its own outcome (post_chunk), so a write that failed
  // against a dead peer fails the request even where the flush after it succeeds.
  return s->result();
}

inline status backend::peek(const request& r) const noexcept {
  return nixl::detail::peek(r.slot_,
                            r.peer_ != nullptr && r.peer_->failed.load(std::memory_order_acquire));
}

static_assert(nixl::waking_backend<backend> && nixl::peeking_backend<backend> &&
              nixl::aborting_backend<backend> && nixl::watching_backend<backend> &&
              nixl::closing_aware_backend<backend>);
static_assert(nixl::peer_backend<backend> && nixl::estimating_backend<backend> &&
              nixl::connecting_backend<backend> && nixl::backend_for<backend, dram_t, dram_t>);
static_assert(nixl::backend_for<backend, nixl::vram_t, nixl::vram_t> == (NIXL_UCX_WITH_CUDA != 0));

}  // namespace nixl::ucx
