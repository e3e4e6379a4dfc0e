#pragma once
/// `nixl::libfabric::backend`: DRAM transfers between agents of one or several hosts over
/// libfabric RDM endpoints with RMA (EFA, verbs, tcp;ofi_rxm, shm), striped over several rails,
/// with notifications, a progress thread and dead-peer detection. NIXL's backend name
/// "LIBFABRIC". See docs/libfabric.md.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/libfabric/config.hpp>
#include <nixl/backends/libfabric/detail/engine.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/backend_checks.hpp>
#include <nixl/detail/peer_ref.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::libfabric {

/// The LIBFABRIC backend. Moves DRAM between agents (and to itself). GPU memory would need a
/// provider with FI_HMEM for CUDA, which Debian's libfabric does not build; VRAM is refused at
/// compile time (no VRAM in `memory_kinds`).
class backend {
 public:
  static constexpr std::string_view name = "LIBFABRIC";
  using memory_kinds = kind_list<dram_t>;
  using config = libfabric::config;

  /// The params this backend advertises, with their defaults.
  static params default_params();

  /// A registered local region: one memory region per rail and its keys.
  struct region {
    detail::local_mr mr;
    desc range{};
    mem_kind kind = mem_kind::dram;
    std::string public_data;  ///< what peers unpack
  };

  /// A peer's region as seen from here: its base address and one key per peer rail.
  struct remote_region {
    desc range{};
    mem_kind kind = mem_kind::dram;
    detail::peer_state* peer = nullptr;
    std::uint64_t base = 0;
    bool virt_addr = false;
    std::vector<std::uint64_t> keys;
  };

  /// A remote agent (or this agent, for loopback).
  using peer = nixl::detail::peer_ref<detail::peer_state>;

  /// Everything a transfer needs, resolved by `prepare` into its completion slot.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept
        : slot_(std::exchange(o.slot_, nullptr)), peer_(std::exchange(o.peer_, nullptr)) {}
    request& operator=(request&& o) noexcept {
      slot_ = std::exchange(o.slot_, nullptr);
      peer_ = std::exchange(o.peer_, nullptr);
      return *this;
    }
    /// RMA operations libfabric will see (descriptors split at rails and `max_msg_size`).
    std::size_t size() const noexcept { return slot_ ? slot_->chunks.size() : 0; }
    /// True when the progress thread posts this request (`post_thread`), so that post returns
    /// at once.
    bool posted_on_thread() const noexcept { return slot_ != nullptr && slot_->on_thread; }
    /// Rails the request's operations use.
    std::size_t rails() const noexcept {
      if (slot_ == nullptr) return 0;
      std::uint64_t mask = 0;
      for (const detail::chunk& c : slot_->chunks) mask |= std::uint64_t{1} << c.rail;
      return static_cast<std::size_t>(__builtin_popcountll(mask));
    }

   private:
    friend class backend;
    detail::op_slot* slot_ = nullptr;
    detail::peer_state* peer_ = nullptr;
  };

  /// Opens the provider's fabric, domain, address vector, completion queue and endpoint on
  /// each rail, and (unless disabled) the progress thread. Throws `nixl::error` when the
  /// provider or an interface is not there, or a parameter is bad.
  backend(const config& cfg, const backend_context& ctx);
  backend(backend&&) noexcept = default;
  backend& operator=(backend&&) noexcept = default;
  ~backend() = default;

  /// Registers DRAM on every rail. Throws `nixl::error` otherwise.
  region register_region(mem_kind kind, const reg_desc& d);
  void deregister_region(region& r) noexcept;

  /// Resolves a transfer once: descriptors above `stripe_threshold` are striped over the
  /// rails, the others spread over them, each piece split at the provider's `max_msg_size`.
  /// Throws `nixl::error(invalid_param)` for a region of another peer.
  void prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer& p);
  /// Starts a prepared transfer; the notification, if any, is sent once every write of it
  /// completed (with FI_DELIVERY_COMPLETE where the provider has it: the data is visible).
  status post(request& r, notif_arg notif) noexcept;
  /// `success`, `in_progress` or an error (`remote_disconnect` when the peer died).
  status check(request& r) noexcept;
  /// Where the request stands, without progressing anything (request::wait after a wake-up).
  status peek(const request& r) const noexcept;
  /// The calling thread stops polling (request::wait, before it sleeps): the progress thread
  /// leaves the polled window at once (docs/libfabric.md, "Posting").
  void hand_back(const request&) noexcept { eng_->hand_back(); }
  /// True while the progress thread counts an application thread as polling: a post then
  /// leaves the wake-up to the next status check (docs/libfabric.md, "Posting").
  bool polled_window() const noexcept { return eng_->polled(); }
  /// True when the progress thread finishes requests and signals the agent's waker.
  bool wakes_waiters() const noexcept { return eng_->has_progress_thread(); }
  /// Frees the request. One in flight gets `engine::release_grace` (20 ms) to end; then it is
  /// abandoned: no notification goes out (an abort notice once its writes completed, if it
  /// carried one) and the backend keeps its slot (and the memory registrations it uses) until
  /// libfabric completes it, at the latest until destruction.
  status release(request& r) noexcept;

  // loopback
  peer self_peer();
  remote_region load_local(const region& r);
  void unload_region(remote_region& r) noexcept;

  // remote
  /// This agent's endpoint address on each rail, the provider and the backend identity.
  std::string connection_info() const;
  /// Inserts the peer's rail addresses into the address vectors and starts its heartbeat.
  /// Throws on malformed input or a peer of another provider.
  peer load_peer(std::string_view agent, std::span<const std::byte> conn_info);
  /// Which incarnation of its agent connection info comes from (the backend instance), 0 when the
  /// bytes do not say: new connection info of another incarnation is a restart.
  static std::uint64_t incarnation(std::span<const std::byte> conn_info) noexcept;
  void unload_peer(peer& p) noexcept;
  std::string public_data(const region& r) const;
  remote_region unpack(peer& p, mem_kind kind, const desc& d, std::span<const std::byte> data);

  // notifications
  /// Sends a standalone notification (no ordering with transfers). Throws when the peer failed
  /// or no send buffer came free within a second.
  void notify(peer& p, std::string_view msg);
  /// Appends the notifications received so far (sender agent name -> messages).
  void take_notifications(notif_map& out);
  /// Appends the abort notices received so far: the notifications of peers' requests that
  /// ended without success (sent instead of the notification once every write completed).
  void take_aborts(notif_map& out);
  /// Appends the names of the agents found gone: loaded peers that failed, and agents that
  /// sent heartbeats to this one from their progress thread and fell silent for
  /// max(peer_timeout_ms, 4 of their periods), across hosts too (docs/libfabric.md); each until
  /// that name comes back. `gone_events` counts the findings, for waits.
  void gone_agents(std::vector<std::string>& out);
  std::uint64_t gone_events() const noexcept;
  /// Called by the agent as it is destroyed: unloading its peers then tells them nothing (they
  /// are to find it gone), where an invalidation tells the peer that the heartbeats stop.
  void agent_closing() noexcept;

  /// One pass over completions, pending posts and heartbeats; for users without the progress
  /// thread. The target of a transfer must progress: libfabric's tcp and shm providers move
  /// data only when the application reads their completion queues.
  void progress() noexcept { eng_->progress(); }

  /// The effective configuration, the provider and the rails (domain names) in use.
  const config& configuration() const noexcept { return eng_->cfg(); }
  const std::string& provider() const noexcept { return eng_->provider(); }
  std::vector<std::string> rails() const;
  bool has_progress_thread() const noexcept { return eng_->has_progress_thread(); }
  /// True when writes complete only once visible at the target (FI_DELIVERY_COMPLETE).
  bool delivery_complete() const noexcept { return eng_->delivery_complete(); }
  /// True once `p` is known to be gone.
  static bool peer_failed(const peer& p) noexcept { return p.failed(); }

 private:
  std::unique_ptr<detail::engine> eng_;
};

// Hot path

inline status backend::post(request& r, notif_arg notif) noexcept {
  detail::op_slot* s = r.slot_;
  if (s == nullptr) return status::invalid_param;
  if (s->busy()) return status::repost_active;
  if (r.peer_->failed.load(std::memory_order_acquire)) return status::remote_disconnect;
  s->has_notif = notif.has_value();
  if (notif) {
    if (notif->size() > eng_->cfg().max_notif_size) return status::invalid_param;
    s->notif.assign(notif->data(), notif->size());  // capacity reserved at prepare
  }
  return eng_->start(s);
}

inline status backend::check(request& r) noexcept {
  detail::op_slot* s = r.slot_;
  if (s == nullptr) return status::invalid_param;
  const detail::phase st = s->state();
  if (st == detail::phase::idle) return status::not_posted;
  if (st == detail::phase::busy) {
    if (r.peer_->failed.load(std::memory_order_acquire)) return status::remote_disconnect;
    if (!eng_->has_progress_thread())
      eng_->progress();
    else
      eng_->take_up(s);
    if (s->busy())
      return r.peer_->failed.load(std::memory_order_acquire) ? status::remote_disconnect
                                                             : status::in_progress;
  }
  return s->result();
}

inline status backend::peek(const request& r) const noexcept {
  return nixl::detail::peek(r.slot_,
                            r.peer_ != nullptr && r.peer_->failed.load(std::memory_order_acquire));
}

static_assert(nixl::waking_backend<backend> && nixl::peeking_backend<backend> &&
              nixl::aborting_backend<backend> && nixl::handing_backend<backend>);
static_assert(nixl::watching_backend<backend> && nixl::closing_aware_backend<backend>);
static_assert(nixl::peer_backend<backend> && nixl::backend_for<backend, dram_t, dram_t>);

}  // namespace nixl::libfabric
