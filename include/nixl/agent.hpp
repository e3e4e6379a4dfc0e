#pragma once
#define NIXL_AGENT_HPP  // agent/*.hpp are parts of this header
/// `nixl::agent<Backends...>`: a named endpoint that registers memory with its backends,
/// encodes and loads metadata and makes transfer requests. Sending and fetching metadata over
/// the network is the metadata layer's (`nixl::metadata::exchange`, metadata/), which drives an
/// agent through the public calls of the "metadata" section.
///
/// This header declares the class; its members are defined by concern in agent/, a folder
/// that only this header includes (its files include nothing above their own folder: they see
/// what this header included before them):
///   agent/slots.hpp          what the agent stores per backend and per peer
///   agent/backends.hpp       construction, backends and their parameters, progress
///   agent/registration.hpp   register, deregister and query memory
///   agent/peers.hpp          metadata encode/load, peers, generations, dead peers
///   agent/notifications.hpp  notifications
///   agent/transfers.hpp      prepared lists, requests, backend choice
/// and what stands alone is in agent_config.hpp, prepared.hpp, xfer_request.hpp, request.hpp.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nixl/agent_config.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/device_views.hpp>
#include <nixl/detail/region_index.hpp>
#include <nixl/detail/request_links.hpp>
#include <nixl/detail/sync.hpp>
#include <nixl/detail/type_list.hpp>
#include <nixl/detail/waker.hpp>
#include <nixl/log.hpp>
#include <nixl/memory.hpp>
#include <nixl/metadata.hpp>
#include <nixl/prepared.hpp>
#include <nixl/request.hpp>
#include <nixl/status.hpp>
#include <nixl/telemetry.hpp>
#include <nixl/telemetry_export.hpp>
#include <nixl/xfer_request.hpp>

// The agent's parts, after everything they use.
#include <nixl/agent/slots.hpp>

namespace nixl {

/// An agent over a fixed set of backend types. Non-copyable, non-movable.
template <class... Backends>
class agent {
  static_assert(sizeof...(Backends) > 0, "an agent needs at least one backend type");
  static_assert((backend<Backends> && ...), "every agent parameter must satisfy nixl::backend");
  static_assert(detail::unique_names<Backends...>(), "two backends of an agent share a name");
  static_assert(((!remote_backend<Backends> || notifying_backend<Backends>)&&...),
                "a remote backend must also deliver notifications (nixl::notifying_backend)");
  static_assert(((remote_backend<Backends> || loopback_backend<Backends>)&&...),
                "a backend must support loopback (self_peer, load_local) or remote peers");

  template <class B>
  using backend_slot = detail::backend_slot<B>;
  template <class B>
  using peer_slot = detail::peer_slot<B>;
  using peer_state = detail::peer_state<Backends...>;

 public:
  using backend_types = detail::type_list<Backends...>;

  /// A transfer request whose backend is chosen at run time (see xfer_request.hpp).
  using xfer_request = nixl::xfer_request<Backends...>;
  /// A descriptor list resolved once (see prepared.hpp).
  using prepared = nixl::prepared<Backends...>;
  /// A prepared list whose kind is a compile-time tag.
  template <kind_tag Kind>
  using typed_prepared = nixl::typed_prepared<Kind, Backends...>;

  /// Creates an agent named `name`. Throws `nixl::error(invalid_param)` on an empty name.
  explicit agent(std::string name, agent_config cfg = {});
  agent(const agent&) = delete;
  agent& operator=(const agent&) = delete;
  ~agent();

  const std::string& name() const noexcept { return name_; }
  const agent_config& config() const noexcept { return cfg_; }
  bool telemetry_enabled() const noexcept { return telemetry_; }
  /// True when the agent's events go somewhere (NIXL's ring or a named exporter).
  bool telemetry_exporting() const noexcept { return tsink_ != nullptr; }
  /// Adds an event of a layer above (e.g. an error it raised) to the agent's telemetry.
  void record_telemetry(telemetry_event e, std::uint64_t value) noexcept {
    if (tsink_) tsink_->event(e, value);
  }
  thread_sync sync_mode() const noexcept { return lock_.mode(); }

  /// For layers that call the agent from threads of their own (the metadata exchange's
  /// listener): `thread_sync::none` becomes `strict`. Call before those threads start, while no
  /// other thread uses the agent.
  void require_locking() noexcept {
    if (lock_.mode() == thread_sync::none) lock_.set_mode(thread_sync::strict);
  }

  // Backends (agent/backends.hpp)

  /// Names of the backend types this agent was built with.
  static constexpr std::array<std::string_view, sizeof...(Backends)> available_backends() {
    return {std::string_view(Backends::name)...};
  }
  /// Creates backend `B` with string parameters. Throws `invalid_param` when it exists already,
  /// or what the backend throws.
  template <class B>
  B& create_backend(const params& p = {});
  /// Creates the backend called `name` ("UCX", "POSIX", ...). Throws `not_found` for a name
  /// that is not one of this agent's backend types, `invalid_param` for a duplicate.
  void create_backend(std::string_view backend_name, const params& p = {});
  /// True when backend `name` has been created.
  bool has_backend(std::string_view backend_name) const noexcept;
  /// Names of the created backends, in type order.
  std::vector<std::string> created_backends() const;
  /// The created backend `B`; throws `not_found` when it was not created.
  template <class B>
  B& get_backend() const;
  /// Default parameters and kinds of backend type `name` (NIXL's getPluginParams).
  static std::pair<params, std::vector<mem_kind>> plugin_params(std::string_view backend_name);
  /// Parameters a created backend was made with, over its defaults, and its kinds.
  std::pair<params, std::vector<mem_kind>> backend_params(std::string_view backend_name) const;
  /// Drives progress of backends that offer explicit progress (for users without a progress
  /// thread).
  void progress();

  // Memory registration (agent/registration.hpp)

  /// Registers every entry with each created backend that moves this kind (or those named in
  /// `opt`). All-or-nothing per backend; succeeds when at least one backend registered all.
  /// Throws `not_found` when no backend takes the kind, `invalid_param` for a zero length on
  /// dram/vram or an entry registered already, or the last backend error.
  void register_memory(const reg_dlist& list, const backend_options& opt = {});
  /// Deregisters entries; each must equal a registered range. Per backend, if one is missing
  /// nothing is deregistered there. Throws `not_found` when an entry was not registered, and
  /// `not_allowed` (deregistering nothing) while a prepared list or a request still points into
  /// one of them: release those first.
  void deregister_memory(const reg_dlist& list, const backend_options& opt = {});
  /// Asks one backend about registration entries (files: size, mode, mtime). Throws
  /// `invalid_param` unless exactly one backend is named, `not_supported` when it cannot answer.
  std::vector<std::optional<params>> query_memory(const reg_dlist& list,
                                                  const backend_options& opt);

  // Metadata and peers (agent/peers.hpp)

  /// Full metadata: connection info and every registration of every remote-capable backend.
  /// Throws `invalid_param` when no remote-capable backend exists.
  std::string local_metadata() const;
  /// Partial metadata: with an empty list, connection info only; otherwise exactly those
  /// registrations (each must match one) and connection info when `include_conn_info`.
  std::string local_partial_metadata(const reg_dlist& list, bool include_conn_info,
                                     const backend_options& opt = {}) const;
  /// Loads a peer's full or partial metadata and returns its name. Loading is incremental;
  /// identical connection info is accepted again, different info is refused (`not_allowed`),
  /// the agent's own name is refused (`invalid_param`), garbage gives `mismatch`. A peer
  /// loaded after an invalidation gets a new generation.
  std::string load_remote_metadata(std::span<const std::byte> bytes);
  std::string load_remote_metadata(std::string_view bytes) {
    return load_remote_metadata(std::as_bytes(std::span(bytes.data(), bytes.size())));
  }
  /// Drops what was loaded about `remote`. Requests built against it fail with `not_found`.
  /// Throws `invalid_param` for the agent's own name, `not_found` for a peer not loaded (or
  /// dropped already by an earlier call). A peer the agent dropped itself because a backend
  /// reported it disconnected is removed quietly, once, so that a shutdown loop over every
  /// peer goes through.
  void invalidate_remote_metadata(std::string_view remote);
  /// True when `remote`'s metadata is loaded and, if `descs` is not empty, some backend with
  /// its connection info covers all of them.
  bool check_remote_metadata(std::string_view remote, const xfer_dlist& descs = {});
  /// Generation of a loaded peer (0 when not loaded).
  std::uint64_t remote_generation(std::string_view remote);
  /// Names of loaded peers (without the agent itself).
  std::vector<std::string> remote_agents();
  /// Connects eagerly to a loaded peer on every backend that can (or those named in `opt`).
  /// Throws `not_found` when the peer is not loaded, `backend` when no backend (of those named)
  /// has its connection info.
  void make_connection(std::string_view remote, const backend_options& opt = {});

  // Notifications (agent/notifications.hpp)

  /// Appends notifications that arrived, per sender agent, from every backend (or those named
  /// in `opt`). Throws `backend` when no created backend (of those named) delivers them.
  void notifications(notif_map& out, const backend_options& opt = {});
  /// Returns the notifications that arrived (a convenience over the appending form).
  notif_map notifications() {
    notif_map m;
    notifications(m);
    return m;
  }
  /// Waits, without spinning, until a notification arrives or `timeout` passes: appends what
  /// arrived to `out` (as notifications() does) and returns true when something did. Backends
  /// that learn of notifications only when progressed are progressed at intervals of 10 µs
  /// doubling to 1 ms (docs/waiting.md). Throws what notifications() throws.
  bool wait_notifications(notif_map& out, std::chrono::nanoseconds timeout,
                          const backend_options& opt = {});
  /// Appends the abort notices that arrived, per sender agent: the notification messages of
  /// requests that ended on their initiator without success (an error, a release or a stall
  /// timeout while in flight), so that a target waiting for one of them can give up at once.
  /// No notice is also a notification, and no bytes of its request land after it arrives.
  /// Sent by UCX and LIBFABRIC (docs/error-model.md, "Abort notices"); empty for the others.
  void aborted_notifications(notif_map& out, const backend_options& opt = {});
  notif_map aborted_notifications() {
    notif_map m;
    aborted_notifications(m);
    return m;
  }
  /// The remote agents a backend found gone (a process that ended, a host no longer reached):
  /// peers whose metadata is loaded, and agents that only sent to this one (UCX: a hello to a
  /// peer of the same host, beats to one of another host; LIBFABRIC: its heartbeats). A name stays
  /// until it comes back: its metadata loaded again from a live process, or a new process of that
  /// name loading this agent's. So a target waiting for a transfer of a gone agent gives up at once
  /// (docs/error-model.md, "Agents found gone").
  std::vector<std::string> gone_agents(const backend_options& opt = {});
  /// wait_notifications that also ends when an abort notice arrives or an agent is found gone
  /// (gone_agents): appends notifications to `out` and abort notices to `aborts`, and returns
  /// true when either received something or an agent was found gone.
  bool wait_notifications(notif_map& out, notif_map& aborts, std::chrono::nanoseconds timeout,
                          const backend_options& opt = {});

  // Waiting without polling (docs/waiting.md)

  /// The agent's event fd (an eventfd): readable when a request of this agent ends or a
  /// notification arrives, for epoll, poll or asyncio's add_reader. Level-triggered: after it
  /// turned readable, call drain_events(), then look at requests (status()) and notifications.
  /// The fd belongs to the agent; do not close it. Once asked for, every event signals it.
  int event_fd() noexcept { return waker_.share(); }
  /// Empties the event fd's counter (see event_fd).
  void drain_events() noexcept { waker_.drain(); }

  /// Sends a standalone notification to `remote` (or to this agent itself). Throws `not_found`
  /// when no notifying backend has a connection to it.
  void notify(std::string_view remote, std::string_view msg, const backend_options& opt = {});

  // Transfers (agent/transfers.hpp)

  /// Resolves a list once: `remote` empty for the local (initiator) side, a peer's name for its
  /// side, the agent's own name for a loopback target. Throws `not_found` naming the first
  /// descriptor no backend covers, or an unknown peer.
  prepared prepare_list(std::string_view remote, const xfer_dlist& list,
                        const backend_options& opt = {});
  prepared prepare_list(const xfer_dlist& list, const backend_options& opt = {}) {
    return prepare_list({}, list, opt);
  }
  template <kind_tag K>
  typed_prepared<K> prepare_list(std::string_view remote, const xfer_list<K>& list,
                                 const backend_options& opt = {}) {
    return typed_prepared<K>(prepare_list(remote, static_cast<const xfer_dlist&>(list), opt));
  }
  /// Resolves a strided list (NIXL 1.5's strided descriptors): per backend, each row's span
  /// `[addr, addr + (count-1)*stride + len)` must lie in one registered region; the prepared
  /// list keeps the rows (no merging, O(rows) memory) and indexes their blocks in row order,
  /// run i covering flat indices [S_i, S_i + count_i). Throws `not_found` for an empty list, a
  /// row with `count == 0`, `len == 0` or `stride < len`, a span no backend covers, or an
  /// unknown peer.
  prepared prepare_list(std::string_view remote, const strided_dlist& list,
                        const backend_options& opt = {});
  prepared prepare_list(const strided_dlist& list, const backend_options& opt = {}) {
    return prepare_list({}, list, opt);
  }
  template <kind_tag K>
  typed_prepared<K> prepare_list(std::string_view remote, const strided_list<K>& list,
                                 const backend_options& opt = {}) {
    return typed_prepared<K>(prepare_list(remote, static_cast<const strided_dlist&>(list), opt));
  }

  /// Makes a request from index vectors into two prepared lists (local, then remote side),
  /// expanded or strided in any pairing (an index of a strided list is a block of its rows).
  /// Runs contiguous on both sides merge unless `opt.skip_merge`. Throws `invalid_param` for
  /// mismatched counts, indices out of range or lengths that differ, `not_found` when the peer
  /// was invalidated or no backend is common to both lists.
  xfer_request make_request(xfer_op op, const prepared& local, std::span<const int> local_idx,
                            const prepared& remote, std::span<const int> remote_idx,
                            const xfer_options& opt = {});
  /// Typed form: the backend is chosen at compile time, the request is `request<B>`.
  template <kind_tag L, kind_tag R>
  auto make_request(xfer_op op, const typed_prepared<L>& local, std::span<const int> local_idx,
                    const typed_prepared<R>& remote, std::span<const int> remote_idx,
                    const xfer_options& opt = {})
      -> request<detail::select_backend_t<L, R, Backends...>>;

  /// One-shot request from two lists (local, then the remote agent's). Throws `invalid_param`
  /// for different counts or lengths, `not_found` when a descriptor lies outside every
  /// registered region or the peer is unknown.
  xfer_request create_request(xfer_op op, const xfer_dlist& local, const xfer_dlist& remote,
                              std::string_view remote_agent, const xfer_options& opt = {});
  /// Typed one-shot request: the backend is chosen at compile time.
  template <kind_tag L, kind_tag R>
  auto create_request(xfer_op op, const xfer_list<L>& local, const xfer_list<R>& remote,
                      std::string_view remote_agent, const xfer_options& opt = {})
      -> request<detail::select_backend_t<L, R, Backends...>>;

  // Memory views for GPU-initiated transfers (agent/views.hpp, docs/device.md)

  /// A view of this agent's VRAM (every entry inside one backend's registrations); returns
  /// its handle (NIXL's nixlMemViewH). Throws `not_found` when no backend covers every entry,
  /// `not_supported` without a CUDA driver.
  void* prepare_view(const xfer_dlist& list, const view_options& opt = {});
  /// A view of peers' VRAM, entry by entry (`null_agent` entries are placeholders). Throws
  /// `not_found` for an unknown peer, an entry no backend covers or a list of placeholders
  /// only; `not_supported` for a peer this process cannot map (another host).
  void* prepare_view(mem_kind kind, std::span<const remote_entry> list,
                     const view_options& opt = {});
  /// Typed forms: views are of GPU memory, checked at compile time.
  template <kind_tag K>
  void* prepare_view(const xfer_list<K>& list, const view_options& opt = {}) {
    static_assert(std::is_same_v<K, vram_t>, "memory views are of VRAM (xfer_list<vram_t>)");
    return prepare_view(static_cast<const xfer_dlist&>(list), opt);
  }
  template <kind_tag K>
  void* prepare_view(K, std::span<const remote_entry> list, const view_options& opt = {}) {
    static_assert(std::is_same_v<K, vram_t>, "memory views are of VRAM (nixl::vram)");
    return prepare_view(K::value, list, opt);
  }
  /// Releases a view; false (nothing happens) for a handle this agent did not hand out.
  bool release_view(void* handle) noexcept;

  /// The backend's estimate of a request's duration, when it offers one.
  template <class B>
  std::optional<std::chrono::microseconds> estimate_cost(const request<B>& r) const;
  std::optional<std::chrono::microseconds> estimate_cost(const xfer_request& r) const;

 private:
  template <class B>
  backend_slot<B>& slot() const noexcept {
    return const_cast<backend_slot<B>&>(std::get<backend_slot<B>>(slots_));
  }

  // Notifications: both waits (`aborts` null: notifications only)
  bool wait_for_notifications(notif_map& out, notif_map* aborts, std::chrono::nanoseconds timeout,
                              const backend_options& opt);
  /// Calls `f(engine)` for each created backend of `opt`'s selection that tells which agents it
  /// found gone (watching_backend).
  template <class F>
  void for_each_watching(const backend_options& opt, F&& f);

  // Registration
  template <class B>
  void register_with(const reg_dlist& list);
  template <class B>
  void remove_region(mem_kind k, const desc& d) noexcept;
  /// Deregistration: removes the region (and its loopback view) from the indices; when a
  /// prepared list or a request still points into it, marks it retired and keeps the backend's
  /// registration in `backend_slot::retired` until the last of them is gone.
  template <class B>
  void retire_region(mem_kind k, const desc& d) noexcept;
  /// Deregisters, with the backend, the retired regions nothing points into any more (`all`:
  /// every one, at teardown).
  template <class B>
  void sweep_retired(bool all) noexcept;

  // Peers
  std::string load_locked(const agent_metadata& md);
  /// The agent's own peer state (loopback), created on first use.
  peer_state& self_state();
  /// Drops peers that a backend reported dead, remembering their names so that removing one
  /// afterwards succeeds (see invalidate_remote_metadata).
  void prune();
  static bool has_any_peer(const peer_state& st);
  /// The loaded peer (or the agent itself); the reference is valid while the lock is held.
  const std::shared_ptr<peer_state>& find_peer(std::string_view remote, std::string_view call);
  const std::shared_ptr<peer_state>& self_shared(std::string_view call);

  // Transfers
  [[noreturn]] void uncovered_error(std::string_view call, const xfer_dlist& list, std::size_t i,
                                    std::string_view remote) const;
  static void check_indices(const prepared& l, std::span<const int> li, const prepared& r,
                            std::span<const int> ri);
  /// Calls `f.template operator()<B>()` for candidate backends in preference order until it
  /// returns true: the backends named in `names`, in that order; else those that prefer the
  /// pair (nixl::prefers), then the others, each group in type order. A candidate that throws
  /// `not_supported` (it cannot reach that peer) passes to the next; the refusal is rethrown
  /// when no other candidate takes the request.
  template <class F>
  void for_candidates(mem_kind lk, mem_kind rk, const peer_state& st,
                      const std::vector<std::string>& names, F&& f);
  template <class B>
  void require_usable(const peer_state& st) const;
  template <class B>
  void build(request<B>& req, xfer_op op, const prepared& local, std::span<const int> li,
             const prepared& remote, std::span<const int> ri, const xfer_options& opt);
  /// Merges neighbours contiguous on both sides, then lets the backend prepare `req` (a fresh
  /// request); `l` and `r` are the call's temporaries, `pins` what the request keeps registered.
  template <class B>
  void finish(request<B>& req, xfer_op op, std::span<bound_desc<typename B::region>> l,
              std::span<bound_desc<typename B::remote_region>> r,
              const std::shared_ptr<peer_state>& st, const xfer_options& opt,
              std::pair<detail::region_pin, detail::region_pin> pins);

  std::string name_;
  agent_config cfg_;
  detail::agent_lock lock_;
  bool telemetry_ = false;
  std::shared_ptr<detail::telemetry_sink> tsink_;  ///< events, when exported
  std::uint64_t generation_ = 0;
  detail::waker waker_;  ///< before the backends: they signal it until they are destroyed
  std::tuple<backend_slot<Backends>...> slots_;
  std::map<std::string, std::shared_ptr<peer_state>, std::less<>> peers_;
  /// Every peer state made (loaded, or this agent's own): one still held after the agent is
  /// destroyed (by a prepared list) is unloaded from the backends before they go.
  std::vector<std::weak_ptr<peer_state>> states_;
  void track(const std::shared_ptr<peer_state>& st);
  detail::request_links requests_;  ///< requests holding backend state (~agent releases them)
  std::set<std::string, std::less<>> dropped_;  ///< peers pruned as disconnected, not removed yet
  std::list<detail::views::record> views_;      ///< memory views handed out
};

}  // namespace nixl

#include <nixl/agent/backends.hpp>
#include <nixl/agent/notifications.hpp>
#include <nixl/agent/peers.hpp>
#include <nixl/agent/registration.hpp>
#include <nixl/agent/transfers.hpp>
#include <nixl/agent/views.hpp>
