#pragma once
/// The state behind `nixl::libfabric::backend`: one fabric, domain, address vector, completion
/// queue and RDM endpoint per rail, the progress thread, peers, completion slots and received
/// notifications. The setup path is compiled, one file per concern in src/; the data path
/// (`start`, `pump`, completions) is compiled too, in src/transfer.cpp and src/progress.cpp.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <nixl/backends/libfabric/detail/check.hpp>
#include <nixl/backends/libfabric/detail/config.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/completion.hpp>
#include <nixl/detail/event_fd.hpp>
#include <nixl/detail/gone_record.hpp>
#include <nixl/detail/notif_inbox.hpp>
#include <nixl/detail/poll_watch.hpp>
#include <nixl/detail/recycled.hpp>
#include <nixl/detail/unique_fd.hpp>
#include <nixl/detail/waker.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::libfabric::detail {

/// The libfabric API version the backend asks for (Debian 12 ships 1.17).
inline constexpr std::uint32_t api_version = FI_VERSION(1, 17);

class engine;
struct op_slot;
struct peer_state;
/// Whether an engine of this process can still be addressed (src/internal.hpp).
struct local_life;
/// The libfabric objects of an engine destroyed while its endpoint may still be reached
/// (src/context.cpp).
struct parked_engine;

/// Where a request is, as its completion slot records it (the phases every backend shares).
using phase = nixl::detail::phase;

/// What a completion's context is.
enum class ctx_kind : std::uint8_t { rma, notif, ctrl, recv };

/// The context of one posted operation. `fi` comes first: providers that need FI_CONTEXT or
/// FI_CONTEXT2 use it as scratch space.
struct op_ctx {
  fi_context2 fi{};
  ctx_kind kind = ctx_kind::rma;
  std::uint32_t index = 0;     ///< recv: receive buffer; notif, ctrl: send buffer
  op_slot* slot = nullptr;     ///< rma, notif
  peer_state* peer = nullptr;  ///< ctrl: the peer a failed send tells about
};

/// One RMA operation of a request, resolved by prepare.
struct chunk {
  void* local = nullptr;
  std::size_t len = 0;
  void* desc = nullptr;      ///< local memory descriptor on `rail`
  std::uint64_t remote = 0;  ///< remote address (virtual or offset, as the provider wants)
  std::uint64_t key = 0;     ///< remote key on the peer's rail
  fi_addr_t dest = FI_ADDR_UNSPEC;
  std::uint32_t rail = 0;
};

/// Completion state of one request. Slots are owned by the engine and live as long as it does,
/// so a completion never sees freed memory even when the request that posted it is gone. Its
/// phase and result are the shared completion record's.
struct op_slot : nixl::detail::completion {
  /// Operations posted and not completed, plus one held while posting.
  std::atomic<int> outstanding{0};
  std::atomic<int> failure{0};    ///< first error (a `status`), 0: none
  std::atomic<bool> hold{false};  ///< the posting count is still held
  /// Counted among the engine's busy slots (what keeps the progress thread polling); a slot
  /// whose peer failed stops counting, so that operations libfabric never completes do not
  /// keep the thread spinning.
  std::atomic<bool> counted{false};
  std::atomic_flag posting = ATOMIC_FLAG_INIT;  ///< one thread posts this slot at a time
  /// Posted by the progress thread (`post_thread`, set at prepare), and, once started, handed to
  /// it and not yet taken up (by the thread or by a status check, whichever comes first).
  bool on_thread = false;
  std::atomic<bool> handed{false};
  std::uint32_t next = 0;  ///< chunks posted so far (under `posting`)
  bool notif_due = false;  ///< data landed, notification not yet posted (under `posting`)
  bool write = true;
  bool has_notif = false;
  /// The request ended without success (`end`): its notification goes out as an abort notice,
  /// and the slot ends with `end` once that is sent.
  bool abort = false;
  status end = status::success;
  nixl::detail::recycled_vector<chunk> chunks;
  nixl::detail::recycled_vector<op_ctx> ctxs;  ///< one per chunk
  op_ctx notif_ctx;
  std::string notif;  ///< the message, capacity reused
  peer_state* peer = nullptr;
  engine* owner = nullptr;

  /// Records `st` as the request's error unless an earlier one is recorded.
  void fail(status st) noexcept {
    int none = 0;
    failure.compare_exchange_strong(none, static_cast<int>(st), std::memory_order_relaxed);
  }
};

/// Holds a slot's posting flag for a scope, waiting while a pump has it (bounded: the calls one
/// pump makes).
class posting_lock {
 public:
  explicit posting_lock(op_slot* s) noexcept : s_(s) {
    while (s_->posting.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~posting_lock() { unlock(); }
  void unlock() noexcept {
    if (s_ != nullptr) s_->posting.clear(std::memory_order_release);
    s_ = nullptr;
  }
  posting_lock(const posting_lock&) = delete;
  posting_lock& operator=(const posting_lock&) = delete;

 private:
  op_slot* s_;
};

/// One remote agent (or this agent itself, for loopback).
struct peer_state {
  std::string name;
  std::uint64_t uid = 0;        ///< the peer backend's random identity
  std::uint64_t token = 0;      ///< index among this engine's peers (heartbeat replies)
  std::vector<fi_addr_t> addr;  ///< per local rail
  std::size_t remote_rails = 1;
  std::atomic<bool> failed{false};
  /// An engine of this process: addressed only while `local->alive`, under its lock (see
  /// `engine::teardown`). Null for other processes.
  std::shared_ptr<local_life> local;
  /// May send: tcp;ofi_rxm loses operations when both sides open their connection at once
  /// (libfabric issue 7396), so of two agents that load each other only the one with the lower
  /// identity opens it; the other waits until it hears from the peer, or `contact_wait`.
  std::atomic<bool> contact{false};
  std::int64_t contact_deadline_ns = 0;
  bool is_self = false;
  std::atomic<bool> closed{false};  ///< unloaded (set under the engine's peers mutex)
  /// When the peer last showed it lives: a heartbeat answer, or an operation to it that
  /// completed (under load its queue may hold the pings back while the data flows).
  std::atomic<std::int64_t> last_seen_ns{0};
  // heartbeat, under the engine's peers mutex
  std::int64_t ping_sent_ns = 0;
  std::uint64_t ping_seq = 0;
  bool ping_out = false;
};

/// Owns one libfabric object: `fi_close` (or `fi_freeinfo` for an info) once, move-only.
template <class T>
class fi_handle {
 public:
  fi_handle() noexcept = default;
  fi_handle(fi_handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  fi_handle& operator=(fi_handle&& o) noexcept {
    if (this != &o) reset(std::exchange(o.p_, nullptr));
    return *this;
  }
  fi_handle(const fi_handle&) = delete;
  fi_handle& operator=(const fi_handle&) = delete;
  ~fi_handle() { reset(); }
  T* get() const noexcept { return p_; }
  operator T*() const noexcept { return p_; }  // NOLINT: passed straight to fi_* calls
  T* operator->() const noexcept { return p_; }
  /// Where a fi_* call stores a new object (the old one is closed first).
  T** out() noexcept {
    reset();
    return &p_;
  }
  void reset(T* p = nullptr) noexcept {
    if (p_ != nullptr) {
      if constexpr (std::is_same_v<T, fi_info>)
        fi_freeinfo(p_);
      else
        NIXL_FI_WARN(fi_close(&p_->fid));
    }
    p_ = p;
  }

 private:
  T* p_ = nullptr;
};

/// One NIC or interface: its own fabric, domain, address vector, completion queue, endpoint
/// (members in the order they are opened, so that they close in reverse).
struct rail {
  fi_handle<fi_info> info;
  fi_handle<fid_fabric> fabric;
  fi_handle<fid_domain> domain;
  fi_handle<fid_av> av;
  fi_handle<fid_cq> cq;
  fi_handle<fid_ep> ep;
  int wait_fd = -1;
  std::string domain_name;
  std::string address;  ///< fi_getname of the endpoint
  std::size_t max_msg = 0;
  std::mutex mu;  ///< endpoint, completion queue and address vector (FI_THREAD_DOMAIN)
};

/// A registered local region: one memory region per rail.
struct local_mr {
  std::vector<fid_mr*> mrs;
  std::vector<void*> descs;
  std::vector<std::uint64_t> keys;
};

class engine {
 public:
  engine(const config& cfg, const backend_context& ctx);
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Setup path
  const config& cfg() const noexcept { return cfg_; }
  const std::string& agent_name() const noexcept { return agent_name_; }
  const std::string& provider() const noexcept { return provider_; }
  const std::string& connection_info() const noexcept { return conn_info_; }
  std::size_t num_rails() const noexcept { return rails_.size(); }
  rail& rail_at(std::size_t i) noexcept { return *rails_[i]; }
  const rail& rail_at(std::size_t i) const noexcept { return *rails_[i]; }
  bool virt_addr() const noexcept { return virt_addr_; }
  bool has_progress_thread() const noexcept { return thread_.joinable(); }
  bool delivery_complete() const noexcept { return rma_flags_ & FI_DELIVERY_COMPLETE; }
  peer_state* self() noexcept { return self_; }

  local_mr register_memory(void* addr, std::size_t len);
  void deregister_memory(local_mr& m) noexcept;

  peer_state* load_peer(std::string_view name, std::span<const std::byte> info);
  void unload_peer(peer_state* p) noexcept;
  void notify(peer_state* p, std::string_view msg);
  void take_notifications(notif_map& out);
  void take_aborts(notif_map& out);
  /// Appends the names of the agents found gone: loaded peers found dead, and agents that
  /// sent heartbeats to this one from a progress thread and fell silent (docs/libfabric.md,
  /// "Agents found gone"); each until that name comes back. `gone_events` counts the findings.
  void gone_agents(std::vector<std::string>& out);
  std::uint64_t gone_events() const noexcept { return gone_.events(); }
  /// The agent is being destroyed: the unloads that follow are its teardown (no `bye`: its
  /// peers are to learn that it is gone).
  void agent_closing() noexcept { closing_.store(true, std::memory_order_release); }

  op_slot* acquire_slot();
  void release_slot(op_slot* s) noexcept;
  /// Frees a slot's request: waits `release_grace` for one in flight, then orphans it.
  void release(op_slot* s) noexcept;

  // Data path
  /// Starts a prepared slot (state, counts) and posts what it can. Returns the slot's state.
  status start(op_slot* s) noexcept;
  /// One pass over every rail's completions, the posts waiting for room, and (without a
  /// progress thread) the heartbeats. Returns the completions handled.
  std::size_t progress() noexcept;

  /// Whether a request of `ops` operations is posted by the progress thread (`post_thread`).
  bool posts_on_thread(std::size_t ops) const noexcept {
    return thread_.joinable() &&
           nixl::detail::posts_on_thread(cfg_.post_thread, ops, config::post_thread_ops,
                                         sends_in_call_);
  }
  /// A status check of a request in flight while the progress thread runs: posts it here if
  /// it was handed to the thread and the thread has not taken it up (a program that polls then
  /// posts on its own core at once), and wakes the thread if it sleeps (a post in the polled
  /// window leaves that to this check: docs/libfabric.md, "Posting").
  void take_up(op_slot* s) noexcept {
    polls_.poll();
    if (s->handed.load(std::memory_order_relaxed)) pump(s);
    wake_sleeper();
  }
  /// The application thread that polled stops (request::wait, before it sleeps): the polled
  /// window ends now, and a sleeping thread is woken for the posts left to it.
  void hand_back() noexcept {
    if (!thread_.joinable()) return;
    polls_.hand_back();
    if (polls_.open()) wake_sleeper();
  }
  /// True while the progress thread counts an application thread as polling (the window).
  bool polled() const noexcept { return polls_.open(); }

  static constexpr std::chrono::milliseconds release_grace{20};
  static constexpr std::chrono::milliseconds contact_wait{200};
  /// True when this agent may send to `p` now (see `peer_state::contact`).
  bool may_send(peer_state* p) noexcept;
  static constexpr std::size_t max_name_size = 1024;
  /// Addresses that pinged this agent, answered and watched, at most.
  static constexpr std::size_t max_senders = nixl::detail::silence_watch::max_senders;
  static constexpr std::size_t header_size = 32;  ///< room for a message header and name length

 private:
  friend struct engine_access;
  void open_rails();
  void teardown() noexcept;
  void setup_buffers();
  void post_recv(std::uint32_t i) noexcept;
  void pump(op_slot* s) noexcept;
  /// Gives back the count held while posting; the last count runs data_done.
  void drop_hold(op_slot* s) noexcept;
  void data_done(op_slot* s) noexcept;
  std::optional<status> post_notif(op_slot* s) noexcept;
  void complete(op_slot* s, status st) noexcept;
  void uncount(op_slot* s) noexcept {
    if (s->counted.exchange(false, std::memory_order_acq_rel))
      active_.fetch_sub(1, std::memory_order_acq_rel);
  }
  void reclaim(op_slot* s) noexcept;
  void queue_retry(op_slot* s) noexcept;
  void run_retries() noexcept;
  std::size_t drain(std::size_t r) noexcept;
  void on_completion(const fi_cq_msg_entry& e) noexcept;
  void on_error(const fi_cq_err_entry& e) noexcept;
  void on_message(const char* data, std::size_t len) noexcept;
  void heartbeat() noexcept;
  /// `drain`: on a full queue, read completions between attempts (not while holding the
  /// peers mutex: a received message takes it).
  /// `to`: the receiver when it is an engine of this process (else null); `p`: the peer a failed
  /// send tells about.
  bool send_ctrl(fi_addr_t dest, peer_state* p, local_life* to, std::string_view bytes,
                 bool drain = true) noexcept;
  int take_send_buffer() noexcept;
  void give_send_buffer(std::uint32_t i) noexcept;
  void mark_failed(peer_state* p, std::string_view why) noexcept;
  void close_deferred(bool force) noexcept;
  /// The libfabric objects this engine opened, handed over for closing (now or later).
  std::unique_ptr<parked_engine> take_resources() noexcept;
  void run() noexcept;
  void wake() noexcept;
  /// Wakes the progress thread if it sleeps, once per sleep: the first caller takes the flag,
  /// so the status checks of a polling application write the eventfd once, not each time.
  void wake_sleeper() noexcept {
    if (sleeping_.load(std::memory_order_seq_cst) &&
        sleeping_.exchange(false, std::memory_order_seq_cst))
      wake();
  }
  void start_thread();
  /// Header, sender name and `msg`: a notification, or an abort notice (`abort`).
  std::string text_message(bool abort, std::string_view msg) const;

  config cfg_;
  std::string agent_name_;
  nixl::detail::waker* waker_ = nullptr;  ///< the agent's: signalled on completions, notifications
  std::string provider_;
  /// The provider moves data inside fi_writemsg / fi_readmsg (tcp, sockets).
  bool sends_in_call_ = false;
  std::uint64_t uid_ = 0;
  /// This engine as the other engines of the process see it (null until it is listed there).
  std::shared_ptr<local_life> life_;
  /// The provider addresses an endpoint of this process through that endpoint's own memory
  /// (shm, and efa through shm): see `engine::teardown`.
  bool shares_in_process_ = false;
  std::vector<std::unique_ptr<rail>> rails_;
  bool virt_addr_ = false;
  bool prov_key_ = false;
  bool mr_endpoint_ = false;
  bool mr_local_ = false;
  std::uint64_t rma_flags_ = 0;
  std::atomic<std::uint64_t> next_key_{1};
  std::string conn_info_;

  // rail 0: receive and send buffers for notifications and heartbeats, one registration
  std::size_t msg_cap_ = 0;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> bufs_{nullptr, nullptr};
  fi_handle<fid_mr> bufs_mr_;
  void* bufs_desc_ = nullptr;
  std::vector<op_ctx> recv_ctx_;
  std::vector<op_ctx> send_ctx_;
  std::size_t send_count_ = 0;
  std::mutex send_mu_;
  std::vector<std::uint32_t> free_send_;

  std::mutex peers_mu_;
  std::vector<std::unique_ptr<peer_state>> peers_;  // retired peers stay until destruction
  peer_state* self_ = nullptr;
  /// Where heartbeats come from (rail 0), and the sender's life when it is of this process.
  /// A sender whose pings are regular is watched: silent past its limit, it is gone.
  struct reply_to {
    fi_addr_t addr = FI_ADDR_UNSPEC;
    std::shared_ptr<local_life> life;
    std::string name;       ///< the sender's agent name
    std::uint64_t uid = 0;  ///< the sender backend's identity
    /// its last ping; not watched while its pings are not regular, or after its bye
    nixl::detail::silence_watch watch;
  };
  /// Watches the sender of a ping: agent `name`, backend `uid`, pinging every `period_ms`
  /// (0: not regularly). Under peers_mu_.
  void watch_sender(reply_to& to, std::string_view name, std::uint64_t uid, std::uint32_t period_ms,
                    std::int64_t now) noexcept;
  /// Senders silent past their limit, or of this process and destroyed, are gone (under
  /// peers_mu_).
  void check_senders(std::int64_t now) noexcept;
  void note_gone(std::string_view name, bool gone) noexcept;
  std::map<std::string, reply_to, std::less<>> reply_addr_;
  std::int64_t next_heartbeat_ns_ = 0;
  std::atomic<int> awaiting_contact_{0};  ///< peers not yet heard from that wait for it

  nixl::detail::slot_pool<op_slot> slots_;
  std::atomic<int> orphans_{0};
  std::atomic<int> active_{0};  ///< busy slots

  std::mutex retry_mu_;
  std::vector<op_slot*> retry_;
  std::atomic<bool> has_retry_{false};

  std::mutex deferred_mu_;
  std::vector<fid_mr*> deferred_;

  nixl::detail::notif_inbox inbox_;   ///< notifications and abort notices received
  nixl::detail::gone_record gone_;    ///< agents found gone (gone_agents)
  std::atomic<bool> closing_{false};  ///< agent_closing() was called

  nixl::detail::unique_fd epoll_fd_;
  nixl::detail::event_fd wake_fd_;
  std::atomic<bool> sleeping_{false};
  /// Status checks of requests in flight (take_up) and the polled window the thread keeps.
  nixl::detail::poll_watch polls_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace nixl::libfabric::detail
