#pragma once
/// The state behind `nixl::ucx::backend`: UCX context and workers, the progress thread, peers,
/// completion slots and received notifications. The setup path is compiled, one file per
/// concern in src/ (context, config, wire, progress, registration, peers, transfer); the few
/// members the hot path needs are inline here.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <ucp/api/ucp.h>

#include <nixl/backends/ucx/detail/config.hpp>
#include <nixl/backends/ucx/detail/gpu.hpp>
#include <nixl/backends/ucx/detail/ucs.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/completion.hpp>
#include <nixl/detail/event_fd.hpp>
#include <nixl/detail/gone_record.hpp>
#include <nixl/detail/host_identity.hpp>
#include <nixl/detail/notif_inbox.hpp>
#include <nixl/detail/poll_watch.hpp>
#include <nixl/detail/recycled.hpp>
#include <nixl/detail/thread_index.hpp>
#include <nixl/detail/unique_fd.hpp>
#include <nixl/detail/waker.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::ucx {

namespace detail {

class engine;
struct peer_state;

/// Where a request is, as its completion slot records it (the phases every backend shares).
using phase = nixl::detail::phase;

/// One resolved descriptor pair of a request.
struct xfer_item {
  void* local = nullptr;
  std::size_t len = 0;
  std::uint64_t remote = 0;
  ucp_rkey_h rkey = nullptr;
  ucp_mem_h memh = nullptr;
};
/// A request's operations: large lists reuse freed blocks (recycled.hpp).
using item_vector = nixl::detail::recycled_vector<xfer_item>;

/// A run of a request's descriptors on one endpoint: what one flush covers.
struct op_run {
  const xfer_item* items = nullptr;
  std::uint32_t count = 0;
  ucp_ep_h ep = nullptr;
  std::uint32_t worker = 0;  ///< the endpoint's worker
  /// The peer's pid when this process copies the run's DRAM itself (`host_dram_copy=cma`:
  /// engine::copy_cma), else 0: UCX puts or gets each descriptor.
  int cma_pid = 0;
};

/// Completion state of one request while UCX works on it. Slots are owned by the engine and
/// live as long as it does, so a UCX callback never sees freed memory even when the request
/// that posted it is gone. Its phase and result are the shared completion record's.
struct op_slot : nixl::detail::completion {
  bool has_notif = false;
  std::uint32_t worker = 0;     ///< index of the worker the notification goes out on
  std::atomic<int> flushes{0};  ///< callbacks still outstanding (flushes, kept puts/gets)
  std::atomic<int> failure{0};  ///< first error of a chunk (a `status`), 0: none
  /// Records `st` as the request's failure unless one came first; success records nothing.
  void fail(status st) noexcept {
    int none = 0;
    if (st != status::success)
      failure.compare_exchange_strong(none, static_cast<int>(st), std::memory_order_relaxed);
  }
  ucp_ep_h ep = nullptr;
  engine* owner = nullptr;
  /// The peer of the request (set by prepare): what `engine::handles_in_use` counts per peer.
  std::atomic<peer_state*> peer{nullptr};
  std::string notif;  ///< encoded notification (sender name + message), capacity reused
  /// A copy request of this request awaiting the peer's answer: its token, and when it is
  /// given up (steady clock, ns; 0: none pending).
  std::uint64_t copy_token = 0;
  std::atomic<std::int64_t> copy_deadline_ns{0};
  /// The streams of this request's DRAM <-> VRAM driver copies and the events after them.
  gpu_streams gpu_used;
  /// The peer's copies for this request (a copy request answered with events): those events,
  /// opened here in `copy_ctx` (the context of this request's VRAM).
  gpu_streams peer_copy;
  void* copy_ctx = nullptr;
  /// A post handed to the progress thread (engine::queue_post): its parts (the descriptors
  /// stay the request's), gets or puts, and where it stands: post_idle, post_queued (whoever
  /// claims it first posts it: the thread, a status check of the request, or release, which
  /// cancels it), post_posting (claimed; release waits for its end before the request's
  /// descriptors may go).
  std::vector<op_run> parts;
  bool write = true;
  std::atomic<std::uint8_t> post_state{0};
};

/// One remote agent (or this agent itself, for loopback).
struct peer_state {
  std::string name;
  std::vector<ucp_ep_h> eps;  ///< one per local worker
  /// Per endpoint: it has a TCP lane (UCX's tcp transport writes to the socket inside the put
  /// call until the socket is full), set once when the endpoint is made.
  std::vector<char> tcp_lane;
  std::atomic<bool> failed{false};
  bool closed = false;
  std::atomic<bool> closing{false};  ///< its endpoints are being closed: nothing more is sent
  /// Set when its endpoints are about to close: posts handed to the progress thread are not
  /// made any more (they end as canceled); `handed_posting` counts handed posts being made to it
  /// now, by the progress thread or by the application thread that claimed one.
  std::atomic<bool> no_posts{false};
  std::atomic<int> handed_posting{0};
  bool ucx_peer_mode = false;  ///< data endpoints use UCX's `peer` error mode
  /// A peer on another host in mode `auto`: an endpoint of worker 0 in UCX's `peer` error mode
  /// that carries no data and only watches the peer (its error callback marks it failed), so
  /// that the data endpoints can stay in mode `none`, where UCX 1.22 puts over TCP zero-copy
  /// instead of emulating them with active messages. Null otherwise.
  ucp_ep_h watch_ep = nullptr;
  bool is_self = false;
  /// Sent beats by the progress thread: on another host, watched (error mode not `none`).
  bool beats = false;
  /// Not loaded by the application: an agent that only sent to this one (its hello message),
  /// watched so that its end is known (engine::gone_agents). No data endpoints.
  bool sender_only = false;
  /// Which incarnation: the peer's process token and backend id (its connection info).
  std::uint64_t token = 0, uid = 0;
  int pidfd = -1;  ///< process watch (same host), or -1
  /// A process of this host (this one too) whose DRAM this process copies with
  /// process_vm_writev/readv (`host_dram_copy=cma`, UCX's endpoints to it have a cma lane): its
  /// pid, else 0.
  int cma_pid = 0;
  /// Its large DRAM blocks go through UCX's shared-memory protocol (`shm_min_size`): another
  /// process with a cma pid. Not an agent of this process, which may have no progress thread
  /// and be progressed by no one while this one polls its own request.
  bool shm = false;
  /// Set once the kernel refused those calls (EPERM, ENOSYS: ptrace rules, seccomp), which is
  /// logged once; each request still tries them (the refusal may end).
  std::atomic<bool> cma_refused{false};
  /// The peer runs copy requests: its host memory <-> this process's VRAM (connection info).
  bool host_copies = false;
  /// Liveness of a peer agent in this same process (its backend sets it false when destroyed).
  std::shared_ptr<const std::atomic<bool>> local_alive;
  std::atomic<std::int64_t> next_probe_ns{0};
  engine* owner = nullptr;

  /// Failed, or an agent of this process whose backend is gone (read at once, not at the next
  /// liveness check: UCX 1.22 completes a same-host put without the target, within
  /// microseconds, so a post must not wait for the check to learn that the target left).
  bool gone() const noexcept {
    return failed.load(std::memory_order_acquire) ||
           (local_alive && !local_alive->load(std::memory_order_acquire));
  }
};

/// What the progress thread and the application threads tell each other about one worker.
struct alignas(64) worker_watch {
  /// Polled by every progress an application thread makes on the worker (`check`, `progress`):
  /// while its window is open, that thread drives the worker and the progress thread stays off
  /// it (driven mode).
  nixl::detail::poll_watch polls;
  /// The progress thread sleeps with this worker armed: a post must wake it.
  std::atomic<int> armed_sleep{0};
  /// Posts of many operations in progress on the worker (engine::bulk_post): the progress
  /// thread stays off it until they end.
  std::atomic<std::uint32_t> bulk_posts{0};
  /// Handed-over posts an application thread's status check makes on the worker now (a large
  /// cma copy takes milliseconds without a poll): the worker counts as driven meanwhile, so the
  /// next post does not find it in event mode and wake the progress thread.
  std::atomic<std::uint32_t> app_posts{0};
};

class engine {
 public:
  engine(const config& cfg, const backend_context& ctx);
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Setup path (src/)
  ucp_context_h context() const noexcept { return ctx_.get(); }
  std::size_t num_workers() const noexcept { return workers_.size(); }
  ucp_worker_h worker(std::size_t i) const noexcept { return workers_[i].get(); }
  bool cuda_supported() const noexcept { return cuda_; }
  bool has_progress_thread() const noexcept { return thread_.joinable(); }
  const std::string& agent_name() const noexcept { return agent_name_; }
  const std::string& connection_info() const noexcept { return conn_info_; }
  const config& cfg() const noexcept { return cfg_; }
  peer_state* self() noexcept { return self_; }

  peer_state* load_peer(std::string_view name, std::span<const std::byte> info);
  void unload_peer(peer_state* p) noexcept;
  void connect(peer_state* p);
  op_slot* acquire_slot();
  void release_slot(op_slot* s) noexcept;
  /// Ends `s` with `st`; a slot orphaned meanwhile goes back to the free list instead.
  void complete(op_slot* s, status st) noexcept {
    if (!s->finish(st))
      reclaim(s);
    else if (waker_ != nullptr)
      waker_->notify();
  }
  /// busy -> orphan: UCX keeps the slot until its last callback. False when it is not busy.
  bool detach(op_slot* s) noexcept;
  /// Deregistration and rkey release wait while an orphaned operation may still use them.
  void defer(mem_handle& m) noexcept;
  void defer(std::vector<rkey_handle>& rkeys) noexcept;
  /// Memory handles and rkeys kept by `defer` until UCX is done with them.
  std::size_t kept_handles() noexcept;
  /// The worker of a new request: the calling thread's own with `num_threads` (threads alive at
  /// once get different workers while there are enough), else the next one round-robin.
  std::uint32_t next_worker() noexcept {
    const auto n = static_cast<std::uint32_t>(workers_.size());
    if (cfg_.num_threads > 0) return nixl::detail::thread_index() % n;
    return rr_.fetch_add(1, std::memory_order_relaxed) % n;
  }
  void notify(peer_state* p, std::string_view msg);
  void take_notifications(notif_map& out);
  void take_aborts(notif_map& out);
  /// Appends the names of the agents found gone (loaded peers, and agents that only sent to
  /// this one): each until that name comes back (loaded again alive, or a new process of it
  /// says hello). `gone_events` counts the findings, for waits.
  void gone_agents(std::vector<std::string>& out);
  std::uint64_t gone_events() const noexcept { return gone_.events(); }
  /// The agent is being destroyed: unloading its peers then sends no bye (they are to find it
  /// gone).
  void agent_closing() noexcept { closing_.store(true, std::memory_order_release); }
  /// Tells `p` that a request which carried notification `msg` (`prefixed`: already with this
  /// agent's prefix, as a slot holds it) ended without success: an abort notice on `ep`. Best
  /// effort and never blocks; nothing is sent to a peer that failed.
  void send_abort(peer_state* p, ucp_ep_h ep, std::uint32_t worker, std::string_view msg,
                  bool prefixed) noexcept;
  void progress_all() noexcept;
  std::string endpoint_info(const peer_state* p) const;
  /// UCX-allocated, registered memory (`UCP_MEM_MAP_ALLOCATE`): its address and handle.
  std::pair<void*, ucp_mem_h> allocate(std::size_t bytes);
  void free_allocation(void* addr) noexcept;
  /// The handle of the allocation that covers [addr, addr+len), or null.
  ucp_mem_h allocation_of(std::uintptr_t addr, std::size_t len) noexcept;

  // Data path
  /// Encoded prefix of every notification this agent sends (version, name).
  const std::string& notif_prefix() const noexcept { return notif_prefix_; }

  /// Called once the data of `s` completed (from post or from the flush callback): sends the
  /// notification, or finishes the slot. Returns what post should report.
  status after_data(op_slot* s) noexcept;

  /// One progress pass over worker `i` by an application thread, plus a liveness probe of `p`
  /// when no thread watches.
  void poll(std::uint32_t i, peer_state* p) noexcept {
    note_user_poll(i);
    if (gpu_pending_.load(std::memory_order_relaxed) != 0) [[unlikely]]
      reap_gpu();
    ucp_worker_progress(workers_[i].get());
    if (!thread_.joinable() && p != nullptr && (p->pidfd >= 0 || p->local_alive)) probe(p);
  }

  /// Tells the progress thread that an application thread progresses worker `i`.
  void note_user_poll(std::size_t i) noexcept { watch_[i].polls.poll(); }

  bool worker_driven(std::uint32_t i) const noexcept {
    return i < workers_.size() && watch_[i].polls.open();
  }
  std::uint32_t worker_polls(std::uint32_t i) const noexcept {
    return i < workers_.size() ? watch_[i].polls.polls() : 0;
  }

  /// The application thread that drove worker `i` stops (it goes to sleep until a request ends):
  /// the progress thread, woken if it holds the worker in driven mode, takes it back now.
  void hand_back(std::uint32_t i) noexcept {
    if (!thread_.joinable()) return;
    watch_[i].polls.hand_back();
    if (watch_[i].polls.open()) wake();
  }

  /// A request of at least this many operations is a bulk post (begin_bulk_post).
  static constexpr std::size_t bulk_post_items = 64;
  /// Around a post of many operations on worker `i`. Meanwhile the progress thread does not
  /// progress the worker: UCX's cma transport copies inside progress, with the worker's lock
  /// held, so the posting thread would spin on that lock through every copy the thread makes
  /// (measured: a fifth of a 65,536-block request's CPU time). The end wakes the thread, which
  /// then progresses the operations the post queued, unless an application thread does.
  void begin_bulk_post(std::uint32_t i) noexcept {
    watch_[i].bulk_posts.fetch_add(1, std::memory_order_relaxed);
  }
  void end_bulk_post(std::uint32_t i) noexcept {
    if (watch_[i].bulk_posts.fetch_sub(1, std::memory_order_release) == 1 && thread_.joinable())
      wake();
  }
  /// begin_bulk_post / end_bulk_post around a scope that posts `ops` operations on worker `i`;
  /// nothing for fewer than bulk_post_items.
  class bulk_post_scope {
   public:
    bulk_post_scope(engine& e, std::uint32_t i, std::size_t ops) noexcept
        : e_(ops >= bulk_post_items ? &e : nullptr), w_(i) {
      if (e_ != nullptr) [[unlikely]]
        e_->begin_bulk_post(w_);
    }
    ~bulk_post_scope() {
      if (e_ != nullptr) [[unlikely]]
        e_->end_bulk_post(w_);
    }
    bulk_post_scope(const bulk_post_scope&) = delete;
    bulk_post_scope& operator=(const bulk_post_scope&) = delete;

   private:
    engine* e_;
    std::uint32_t w_;
  };

  /// Whether a request of `ops` operations on `p`'s endpoint of worker `w` is posted by the
  /// progress thread instead of the caller (`post_thread`): requests of many operations, and
  /// every request over a TCP lane (UCX sends inside the put call) or copied by `copy_cma`
  /// (`cma`), so that post returns at once; never without the thread.
  bool posts_on_thread(const peer_state& p, std::uint32_t w, std::size_t ops,
                       bool cma) const noexcept;
  static constexpr std::uint8_t post_idle = 0, post_queued = 1, post_posting = 2;
  /// Hands posted slot `s` (its parts filled, its posting count held) to the progress thread.
  /// False when the queue cannot take it (no memory): the caller posts.
  bool queue_post(op_slot* s) noexcept;
  /// While `on`, the progress thread leaves handed posts queued: a status check of the request or
  /// its release takes them (a diagnostic, for tests of that hand-over). Off wakes the thread.
  void hold_posts(bool on) noexcept {
    posts_held_.store(on, std::memory_order_seq_cst);
    if (!on && thread_.joinable()) wake();
  }
  bool posts_runnable() const noexcept {
    return posts_queued_.load(std::memory_order_seq_cst) &&
           !posts_held_.load(std::memory_order_relaxed);
  }
  /// Takes a queued post of `s` to make it here (post_queued -> post_posting); false when it is
  /// not queued or another thread took it.
  static bool claim_post(op_slot* s) noexcept {
    std::uint8_t q = post_queued;
    return s->post_state.compare_exchange_strong(q, post_posting, std::memory_order_acquire);
  }
  /// Makes the post claimed by claim_post: its parts (ended with `cancel` instead when that is
  /// not success, or when the peer's endpoints close or it failed), then drops the posting
  /// count.
  static void post_claimed(op_slot* s, status cancel) noexcept;
  /// Posts part `pt` of `s`: its puts (`write`) or gets, then the flush of its endpoint. Returns
  /// the request's state when the flush completed at once and was the last (success or an
  /// error), else in_progress. A put or get that UCX keeps reports its own outcome through the
  /// same callback as the flush: in error mode `none`, a failed operation (1.22: a cma write to a
  /// process that exited) still lets the flush succeed, so the flush alone would report success
  /// for data that never landed.
  static status post_part(op_slot* s, const op_run& pt, bool write) noexcept;
  /// Copies the run's descriptors into or out of the peer process's memory with
  /// process_vm_writev/readv, `config::cma_iov` descriptors a call; a failure is recorded in
  /// the slot (`not_allowed` when the kernel refuses the calls).
  static void copy_cma(op_slot* s, const op_run& pt, bool write) noexcept;
  /// Waits until a claimed post of `s` has been made (release).
  static void wait_posted(const op_slot* s) noexcept;

  /// After posting on worker `i`: wake the progress thread if it sleeps armed on that worker.
  /// It does not when an application thread drives the worker (it then looks at it on a
  /// timer), nor while it is awake.
  void kick(std::uint32_t i) noexcept {
    // A read-modify-write orders the posted work before the read of the flag (a full barrier,
    // which a plain load is not); the thread sets the flag before its last pass.
    if (thread_.joinable() && watch_[i].armed_sleep.fetch_or(0, std::memory_order_seq_cst) != 0)
      wake();
  }

  static void on_flush(void* request, ucs_status_t st, void* user) noexcept;
  /// One chunk's data has reached the target; the last one sends the notification or finishes
  /// the slot. Returns what post should report when it ran the last one itself.
  static status flush_done(op_slot* s) noexcept;
  static void on_am_done(void* request, ucs_status_t st, void* user) noexcept;

  static constexpr unsigned notif_am_id = 0x4e;  // 'N'
  static constexpr unsigned copy_am_id = 0x43;   // 'C': a copy request (wire.hpp)
  static constexpr unsigned ack_am_id = 0x41;    // 'A': its answer
  static constexpr unsigned abort_am_id = 0x58;  // 'X': an abort notice (notification format)
  /// 'H': a hello, sent to a peer of this host when it is loaded: the notification format, the
  /// sender's connection info (one worker address) as the message. The receiver watches the
  /// sender (docs/ucx.md, "Agents that only sent to this one").
  static constexpr unsigned hello_am_id = 0x48;
  /// 'B': a beat, sent every `beat_period` by the progress thread to each loaded peer of another
  /// host: the notification format, the sender's beat period in ms (u32) as the message; period
  /// 0 is a bye (the sender unloaded the receiver). The receiver watches the sender by them
  /// (docs/ucx.md, "Agents that only sent to this one").
  static constexpr unsigned beat_am_id = 0x42;
  static constexpr std::chrono::milliseconds beat_period{250};
  /// Agents watched that only sent to this one, at most; hellos queued for the progress pass.
  static constexpr std::size_t max_senders = nixl::detail::silence_watch::max_senders;
  static constexpr std::size_t max_hellos_queued = 1024;
  /// How long a request waits for the peer to answer its copy request.
  static constexpr std::chrono::seconds copy_deadline{30};

  /// Sends copy request `msg` (encoded without its token) of posted slot `s` to `p` on worker
  /// `w`, without waiting: the answer (or the send's failure, the peer's failure, or
  /// `copy_deadline` seen by `expire_copy`) ends one of the slot's counts, as a flush does.
  /// `ctx`: the context of the request's VRAM, where the events of an answer are opened.
  void delegate_copy(op_slot* s, peer_state* p, std::uint32_t w, std::string& msg,
                     void* ctx) noexcept;
  /// Issues the driver copies of posted slot `s` without waiting: their end is one of the
  /// slot's counts, ended by `reap_gpu` (or here, when they ended before this returns).
  void gpu_start(op_slot* s, std::span<const gpu_item> items) noexcept;
  /// Ends the count of every slot whose driver copies have ended (their events): called by
  /// every poll while copies are pending, and by the progress thread.
  void reap_gpu() noexcept;
  /// Waits for `s`'s driver copies, then ends their count (a release in flight).
  void wait_gpu(op_slot* s) noexcept;
  /// Slots whose driver copies run.
  bool gpu_pending() const noexcept { return gpu_pending_.load(std::memory_order_relaxed) != 0; }
  /// Gives up `s`'s copy request: its deadline passed (called by `check`).
  void expire_copy(op_slot* s) noexcept;
  /// Ends the copy request of `token`, if still awaited, with failure `st`.
  void fail_copy(std::uint64_t token, status st) noexcept;
  std::uint64_t peer_copies_issued() const noexcept {
    return copies_issued_.load(std::memory_order_relaxed);
  }
  /// Ends every awaited copy request to `p` with remote_disconnect (`p` failed).
  void fail_copies_of(const peer_state* p) noexcept;
  /// Host memory registered with this backend (the ranges a copy request may touch).
  void add_host_region(std::uintptr_t addr, std::size_t len);
  void remove_host_region(std::uintptr_t addr, std::size_t len) noexcept;
  /// Whether this backend runs copy requests for its peers (advertised in its connection info).
  bool runs_host_copies() const noexcept;
  /// How long `release` lets a request in flight finish before it abandons it.
  static constexpr std::chrono::milliseconds release_grace{20};
  /// How long unloading a live peer waits for what is still in flight to it.
  static constexpr std::int64_t flush_limit_ns = 30'000'000'000;
  static constexpr std::size_t max_notif_size = std::size_t{64} << 20;
  static constexpr std::size_t max_name_size = 1024;

 private:
  void probe(peer_state* p) noexcept;
  void reclaim(op_slot* s) noexcept;
  void drain_deferred(bool force) noexcept;
  /// True while UCX may still hold operations that use local memory handles or rkeys: released
  /// requests in flight, or requests in flight to a failed peer in UCX error mode `none`, whose
  /// endpoints UCX will not force-close (their queued operations are purged only when the
  /// worker is destroyed).
  bool handles_in_use() noexcept;
  template <class H>
  void defer_handles(std::vector<H>& list, std::span<H> handles) noexcept;
  void connect_self();
  void start_progress_thread(std::chrono::microseconds delay);
  void check_local_peers() noexcept;
  void wake() noexcept;
  /// Wakes the progress thread for work on worker `w` (a post, a copy's events to watch) unless
  /// this is that thread or an application thread drives `w`: its next status check takes the
  /// work, and the thread looks within a tick anyway.
  void wake_for(std::uint32_t w) noexcept {
    if (has_progress_thread() && !watch_[w].polls.open() &&
        std::this_thread::get_id() != thread_.get_id())
      wake();
  }
  void run() noexcept;
  bool sleep_armed(const std::vector<char>& off) noexcept;
  /// The progress thread posts what queue_post handed it and no other thread claimed (`fail`:
  /// the engine stops; those posts end as canceled instead).
  void run_queued_posts(bool fail) noexcept;
  void set_worker_events(std::size_t i, bool on) noexcept;
  void watch(peer_state* p);
  void mark_failed(peer_state* p, std::string_view why) noexcept;
  void close_eps(peer_state* p) noexcept;
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t st) noexcept;
  static ucs_status_t on_notif(void* arg, const void* header, std::size_t header_len, void* data,
                               std::size_t len, const ucp_am_recv_param_t* param) noexcept;
  static ucs_status_t on_abort(void* arg, const void* header, std::size_t header_len, void* data,
                               std::size_t len, const ucp_am_recv_param_t* param) noexcept;
  ucs_status_t receive(const void* data, std::size_t len, const ucp_am_recv_param_t* param,
                       bool abort) noexcept;
  static ucs_status_t on_hello(void* arg, const void* header, std::size_t header_len, void* data,
                               std::size_t len, const ucp_am_recv_param_t* param) noexcept;
  /// Watches the senders of the hellos received (after a progress pass, outside UCX's
  /// callback).
  void adopt_senders() noexcept;
  void watch_sender(std::string_view hello);
  static ucs_status_t on_beat(void* arg, const void* header, std::size_t header_len, void* data,
                              std::size_t len, const ucp_am_recv_param_t* param) noexcept;
  /// A beat (or, `period_ms` 0, a bye) of agent `name` arrived.
  void note_beat(std::string_view name, std::uint32_t period_ms) noexcept;
  /// The progress thread's beats to the peers of other hosts, every beat_period.
  void send_beats(std::int64_t now) noexcept;
  /// Senders of beats silent past their limit are gone (time in which this side did not judge,
  /// its thread or process not running, counts against none).
  void judge_beats(std::int64_t now) noexcept;
  /// Sends `p` this agent's beat, or a bye.
  void send_beat(peer_state* p, bool bye) noexcept;
  /// How often beats go: beat_period, or the progress thread's longest sleep when longer.
  std::int64_t beat_every_ns() const noexcept {
    return std::max<std::int64_t>(std::chrono::nanoseconds(beat_period).count(),
                                  std::int64_t{timeout_ms_} * 1'000'000);
  }
  /// How `p` is watched: another agent of this process by its backend's liveness; a process of
  /// this host by a pidfd (false when pidfd_open failed otherwise than for a process gone); the
  /// endpoint of worker 0 in UCX's peer error mode that only watches.
  void watch_local(peer_state* p, std::uint64_t uid) noexcept;
  bool open_pidfd(peer_state* p, const nixl::detail::host_identity& id) noexcept;
  ucs_status_t open_watch_ep(peer_state* p, std::string_view address) noexcept;
  void add_pidfd_watch(peer_state* p) noexcept;
  /// Records `name` as gone (`gone`) or back.
  void note_gone(std::string_view name, bool gone) noexcept;
  static ucs_status_t on_copy(void* arg, const void* header, std::size_t header_len, void* data,
                              std::size_t len, const ucp_am_recv_param_t* param) noexcept;
  static ucs_status_t on_copy_ack(void* arg, const void* header, std::size_t header_len, void* data,
                                  std::size_t len, const ucp_am_recv_param_t* param) noexcept;
  /// Runs a copy request: issues its copies and, when the request asked for them, returns the
  /// events after them in `events` without waiting (served_); else waits for the copies.
  status run_copy(std::string_view data, std::uint64_t& token, ipc_events& events) noexcept;
  /// Copies run for peers, until their events say they ended: what they use (the peers'
  /// mappings) is kept until then.
  struct served_copy {
    gpu_streams g;
    std::vector<std::shared_ptr<ipc_mapping>> keep;
    std::int64_t issued_ns = 0;
    std::size_t bytes = 0;
  };
  /// Lists `job`, issued now: its expected end moves `served_watch_from()`.
  void add_served(std::unique_ptr<served_copy> job);
  /// Forgets the served copies that ended; with `all`, waits for every one first. Returns how
  /// many ended.
  std::size_t reap_served(bool all) noexcept;
  /// Copies run for peers that have not been seen to end.
  bool served_pending() const noexcept {
    return served_pending_.load(std::memory_order_relaxed) != 0;
  }
  /// When the progress thread starts polling for the end of the copies run for peers (shortly
  /// before they are expected to end, at the rate of those before them).
  std::int64_t served_watch_from() const noexcept {
    return served_watch_from_.load(std::memory_order_relaxed);
  }
  /// ... and until when at most: copies that run far longer than expected (a stream held up by
  /// other work) are looked at every 20 us again, not polled for.
  std::int64_t served_watch_until() const noexcept {
    return served_watch_until_.load(std::memory_order_relaxed);
  }

  config cfg_;
  std::string agent_name_;
  nixl::detail::waker* waker_ = nullptr;  ///< the agent's: signalled on completions, notifications
  std::string notif_prefix_;
  context_handle ctx_;
  std::vector<worker_handle> workers_;
  std::unique_ptr<worker_watch[]> watch_;
  std::vector<int> efds_;  ///< the workers' event fds (progress thread only)
  std::vector<std::string> addresses_;
  std::string conn_info_;
  bool cuda_ = false;
  bool tcp_only_ = false;  ///< the context's transports are TCP alone (UCX_TLS=tcp)

  // this process, for choosing same-host paths and the liveness watch of peers
  nixl::detail::host_identity id_;
  // Why UCX may not see this network namespace's devices (empty when it does); see load_peer
  std::string netdev_problem_;
  std::uint64_t uid_ = 0;  ///< identifies this backend among those of the process
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);

  std::atomic<std::uint32_t> rr_{0};

  std::mutex peers_mu_;
  std::vector<std::unique_ptr<peer_state>> peers_;  // retired peers stay until destruction
  peer_state* self_ = nullptr;

  nixl::detail::slot_pool<op_slot> slots_;
  std::atomic<int> orphans_{0};  ///< released requests UCX still works on

  std::mutex deferred_mu_;
  std::vector<mem_handle> deferred_memh_;
  std::vector<rkey_handle> deferred_rkeys_;

  nixl::detail::notif_inbox inbox_;  ///< notifications and abort notices received
  std::string hello_;                ///< this agent's hello message

  std::mutex hello_mu_;
  std::vector<std::string> hellos_;  ///< received, not watched yet
  std::atomic<bool> hellos_pending_{false};
  nixl::detail::gone_record gone_;  ///< agents found gone (gone_agents)
  std::atomic<bool> senders_full_logged_{false};
  std::atomic<bool> closing_{false};  ///< agent_closing() was called
  std::int64_t next_beat_ns_ = 0;     ///< progress thread only
  std::string beat_;                  ///< this agent's beat (its period set when the thread starts)
  /// Agents that send beats to this one: when each was last heard, its limit, found gone.
  std::mutex beats_mu_;
  std::map<std::string, nixl::detail::silence_watch, std::less<>> beats_;
  std::int64_t last_judge_ns_ = 0;  ///< under beats_mu_

  std::mutex alloc_mu_;
  std::map<std::uintptr_t, std::pair<std::size_t, ucp_mem_h>> allocs_;

  // copy requests: host regions they may touch, and the posts waiting for answers (token ->
  // status, in_progress until answered); the peers' VRAM opened for them is kept, idle, in the
  // process's table of CUDA IPC mappings with this engine as keeper
  std::mutex copy_mu_;
  std::multimap<std::uintptr_t, std::size_t> host_regions_;
  std::map<std::uint64_t, op_slot*> copy_waiters_;  ///< copy requests awaiting their answer
  /// Copies run for peers, in flight: a lock of their own, so that looking at their events
  /// (driver calls) never holds up a post's copy request (copy_mu_).
  std::mutex served_mu_;
  std::vector<std::unique_ptr<served_copy>> served_;
  std::atomic<int> served_pending_{0};  ///< served_.size(), read without the lock
  double served_ns_per_byte_ = 0;       ///< the copies' rate so far (0: none seen); served_mu_
  std::int64_t served_end_ns_ = 0;      ///< when the last copy was seen to end; served_mu_
  std::int64_t served_due_ns_ = 0;      ///< when the last copy issued should end; served_mu_
  std::atomic<std::int64_t> served_watch_from_{0};
  std::atomic<std::int64_t> served_watch_until_{0};
  /// Slots whose driver copies (gpu_used) or peer's copies (peer_copy) run, and how many: one
  /// count of the slot each.
  std::mutex gpu_mu_;
  std::vector<std::pair<op_slot*, gpu_streams*>> gpu_slots_;
  std::atomic<int> gpu_pending_{0};
  /// Lists `g` of `s` as running (false: out of memory; nothing listed).
  bool watch_gpu(op_slot* s, gpu_streams& g) noexcept;
  void finish_gpu(op_slot* s, gpu_streams& g, status st) noexcept;
  /// Takes the waiter of `token` out of copy_waiters_; null when its answer was handled.
  op_slot* take_copy_waiter(std::uint64_t token) noexcept;
  /// Ends `s`'s copy count with `st` (success, or the first failure of the request).
  static void copy_done(op_slot* s, status st) noexcept;
  std::atomic<std::uint64_t> copy_token_{1};
  std::atomic<std::uint64_t> copies_issued_{0};  ///< answers with events (peer_copies_issued)

  std::mutex post_mu_;
  std::vector<op_slot*> post_queue_;  ///< posts the progress thread makes (queue_post)
  std::vector<op_slot*> posting_;     ///< the thread's batch of them (capacity reused)
  std::atomic<bool> posts_queued_{false};
  std::atomic<bool> posts_held_{false};  ///< hold_posts: the thread leaves the queue alone

  nixl::detail::unique_fd epoll_fd_;
  nixl::detail::event_fd wake_fd_;
  std::atomic<bool> stop_{false};
  int timeout_ms_ = 100;
  std::thread thread_;
};

inline status engine::after_data(op_slot* s) noexcept {
  if (!s->has_notif) {
    complete(s, status::success);
    return status::success;
  }
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  p.cb.send = &engine::on_am_done;
  p.user_data = s;
  ucp_ep_h ep = s->ep;
  const char* msg = s->notif.data();
  const std::size_t len = s->notif.size();
  // on_am_done may end the slot on another thread, which may then release it: this store
  // (acquired there) orders the reads above before that, without relying on UCX's worker lock.
  s->flushes.store(0, std::memory_order_release);
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, notif_am_id, nullptr, 0, msg, len, &p);
  if (r == nullptr) {
    complete(s, status::success);
    return status::success;
  }
  if (UCS_PTR_IS_ERR(r)) {
    const status e = to_status(UCS_PTR_STATUS(r));
    complete(s, e);
    return e;
  }
  return status::in_progress;
}

inline void engine::on_flush(void* request, ucs_status_t st, void* user) noexcept {
  ucp_request_free(request);
  auto* s = static_cast<op_slot*>(user);
  if (st != UCS_OK) s->fail(to_status(st));
  flush_done(s);
}

inline status engine::flush_done(op_slot* s) noexcept {
  // The last chunk's flush finishes the request. acq_rel: every chunk's outcome, and the
  // notification fields written by post() (release store of `state`), are visible here.
  if (s->flushes.fetch_sub(1, std::memory_order_acq_rel) != 1) return status::in_progress;
  const phase state = s->state();
  const int f = s->failure.load(std::memory_order_relaxed);
  if (f != 0 || state == phase::orphan) {
    // A released or failed request sends no notification: an abort notice instead, now that
    // UCX has done with its data (no byte of it lands after the notice).
    const status e = f != 0 ? static_cast<status>(f) : status::canceled;
    if (s->has_notif) [[unlikely]]
      s->owner->send_abort(s->peer.load(std::memory_order_relaxed), s->ep, s->worker, s->notif,
                           true);
    s->owner->complete(s, e);
    return e;
  }
  // read before after_data: once the notification is handed to UCX, the slot may end and be
  // released on another thread
  engine* const eng = s->owner;
  const std::uint32_t w = s->worker;
  const status st = eng->after_data(s);
  if (st == status::in_progress) eng->kick(w);
  return st;
}

inline status engine::post_part(op_slot* s, const op_run& pt, bool write) noexcept {
  if (pt.cma_pid != 0) {
    copy_cma(s, pt, write);
    return flush_done(s);
  }
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &engine::on_flush;
  p.user_data = s;
  for (std::uint32_t i = 0; i < pt.count; ++i) {
    const xfer_item& it = pt.items[i];
    p.memh = it.memh;
    ucs_status_ptr_t sp = write ? ucp_put_nbx(pt.ep, it.local, it.len, it.remote, it.rkey, &p)
                                : ucp_get_nbx(pt.ep, it.local, it.len, it.remote, it.rkey, &p);
    if (UCS_PTR_IS_PTR(sp)) {
      s->flushes.fetch_add(1, std::memory_order_relaxed);  // its callback ends it
    } else if (UCS_PTR_IS_ERR(sp)) {
      s->fail(to_status(UCS_PTR_STATUS(sp)));
      return flush_done(s);  // this part ends here, without a flush
    }
  }
  // nothing put or got (a request the peer copies, through a copy request): nothing to flush
  if (pt.count == 0) return flush_done(s);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  ucs_status_ptr_t f = ucp_ep_flush_nbx(pt.ep, &p);
  if (UCS_PTR_IS_PTR(f)) return status::in_progress;
  if (UCS_PTR_IS_ERR(f)) s->fail(to_status(UCS_PTR_STATUS(f)));
  return flush_done(s);
}

inline void engine::on_am_done(void* request, ucs_status_t st, void* user) noexcept {
  ucp_request_free(request);
  auto* s = static_cast<op_slot*>(user);
  (void)s->flushes.load(std::memory_order_acquire);  // after_data's reads of the slot
  s->owner->complete(s, to_status(st));
}

}  // namespace detail
}  // namespace nixl::ucx
