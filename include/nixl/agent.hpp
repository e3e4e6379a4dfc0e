#pragma once
// Above 600 lines on purpose: one class template whose member functions (backends,
// registration, metadata encode/load, notifications, transfers) share its private slots; what
// stands alone is in agent_config.hpp, prepared.hpp, xfer_request.hpp and detail/.
/// `nixl::agent<Backends...>`: a named endpoint that registers memory with its backends,
/// encodes and loads metadata and makes transfer requests. Sending and fetching metadata over
/// the network is the metadata layer's (`nixl::metadata::exchange`, metadata/), which drives an
/// agent through the public calls of the "metadata" section.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/ranges.h>

#include <nixl/agent_config.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/agent_slots.hpp>
#include <nixl/detail/region_index.hpp>
#include <nixl/detail/resolve.hpp>
#include <nixl/detail/sync.hpp>
#include <nixl/detail/type_list.hpp>
#include <nixl/log.hpp>
#include <nixl/memory.hpp>
#include <nixl/metadata.hpp>
#include <nixl/prepared.hpp>
#include <nixl/request.hpp>
#include <nixl/status.hpp>
#include <nixl/telemetry.hpp>
#include <nixl/xfer_request.hpp>

namespace nixl {

/// An agent over a fixed set of backend types. Non-copyable, non-movable.
template <class... Backends>
requires(sizeof...(Backends) > 0) class agent {
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
  explicit agent(std::string name, agent_config cfg = {})
      : name_(std::move(name)), cfg_(std::move(cfg)), lock_(cfg_.sync) {
    if (name_.empty())
      raise(status::invalid_param, "agent: the name is empty; give every agent a unique name");
    telemetry_ = detail::telemetry_enabled(cfg_.capture_telemetry);
  }
  agent(const agent&) = delete;
  agent& operator=(const agent&) = delete;

  ~agent() {
    peers_.clear();
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& s = slot<B>();
      if (!s.engine) return;
      for (auto& idx : s.regions)
        for (auto& e : idx.take_all()) s.engine->deregister_region(*e.region);
    });
  }

  const std::string& name() const noexcept { return name_; }
  const agent_config& config() const noexcept { return cfg_; }
  bool telemetry_enabled() const noexcept { return telemetry_; }
  thread_sync sync_mode() const noexcept { return lock_.mode(); }

  /// For layers that call the agent from threads of their own (the metadata exchange's
  /// listener): `thread_sync::none` becomes `strict`. Call before those threads start, while no
  /// other thread uses the agent.
  void require_locking() noexcept {
    if (lock_.mode() == thread_sync::none) lock_.set_mode(thread_sync::strict);
  }

  // Backends

  /// Names of the backend types this agent was built with.
  static constexpr std::array<std::string_view, sizeof...(Backends)> available_backends() {
    return {std::string_view(Backends::name)...};
  }

  /// Creates backend `B` with string parameters. Throws `invalid_param` when it exists already,
  /// or what the backend throws.
  template <class B>
  B& create_backend(const params& p = {}) {
    static_assert(detail::index_of<B, Backends...> < sizeof...(Backends),
                  "create_backend<B>: B is not one of this agent's backend types");
    auto g = lock_.exclusive();
    auto& s = slot<B>();
    if (s.engine)
      raise(status::invalid_param, "create_backend: backend {} already exists in agent '{}'",
            B::name, name_);
    backend_context ctx{name_, lock_.mode(), cfg_.enable_prog_thread, cfg_.progress_delay};
    auto engine = std::make_unique<B>(B::config::from_params(p), ctx);
    std::string conn;
    if constexpr (remote_backend<B>) conn = std::string(engine->connection_info());
    if constexpr (loopback_backend<B>) {
      auto& self = self_state();
      auto& ps = std::get<peer_slot<B>>(self.slots);
      ps.peer.emplace(engine->self_peer());
      ps.engine = engine.get();
    }
    s.engine = std::move(engine);
    s.user_params = p;
    s.conn_info = std::move(conn);
    log::info("agent '{}': created backend {}", name_, B::name);
    return *s.engine;
  }

  /// Creates the backend called `name` ("UCX", "POSIX", ...). Throws `not_found` for a name
  /// that is not one of this agent's backend types, `invalid_param` for a duplicate.
  void create_backend(std::string_view backend_name, const params& p = {}) {
    bool found = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (!found && B::name == backend_name) {
        found = true;
        create_backend<B>(p);
      }
    });
    if (!found)
      raise(status::not_found, "create_backend: unknown backend '{}'; this agent has {}",
            backend_name, fmt::join(available_backends(), ", "));
  }

  /// True when backend `name` has been created.
  bool has_backend(std::string_view backend_name) const noexcept {
    bool r = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (B::name == backend_name && slot<B>().engine) r = true;
    });
    return r;
  }

  /// Names of the created backends, in type order.
  std::vector<std::string> created_backends() const {
    std::vector<std::string> out;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (slot<B>().engine) out.emplace_back(B::name);
    });
    return out;
  }

  /// The created backend `B`; throws `not_found` when it was not created.
  template <class B>
  B& get_backend() const {
    auto& s = slot<B>();
    if (!s.engine)
      raise(status::not_found, "backend {} was not created in agent '{}'; call create_backend",
            B::name, name_);
    return *s.engine;
  }

  /// Default parameters and kinds of backend type `name` (NIXL's getPluginParams).
  static std::pair<params, std::vector<mem_kind>> plugin_params(std::string_view backend_name) {
    std::optional<std::pair<params, std::vector<mem_kind>>> r;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (B::name == backend_name) r.emplace(params(B::default_params()), detail::kinds_of<B>());
    });
    if (!r) raise(status::not_found, "plugin_params: unknown backend '{}'", backend_name);
    return *r;
  }

  /// Parameters a created backend was made with, over its defaults, and its kinds.
  std::pair<params, std::vector<mem_kind>> backend_params(std::string_view backend_name) const {
    std::optional<std::pair<params, std::vector<mem_kind>>> r;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (B::name == backend_name && slot<B>().engine) {
        params p = B::default_params();
        for (const auto& [k, v] : slot<B>().user_params) p[k] = v;
        r.emplace(std::move(p), detail::kinds_of<B>());
      }
    });
    if (!r) raise(status::not_found, "backend_params: backend '{}' was not created", backend_name);
    return *r;
  }

  /// Drives progress of backends that offer explicit progress (for users without a progress
  /// thread).
  void progress() {
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (progressing_backend<B>) {
        if (auto& s = slot<B>(); s.engine) s.engine->progress();
      }
    });
  }

  // Memory registration

  /// Registers every entry with each created backend that moves this kind (or those named in
  /// `opt`). All-or-nothing per backend; succeeds when at least one backend registered all.
  /// Throws `not_found` when no backend takes the kind, `invalid_param` for a zero length on
  /// dram/vram or an entry registered already, or the last backend error.
  void register_memory(const reg_dlist& list, const backend_options& opt = {}) {
    auto g = lock_.exclusive();
    const mem_kind k = list.kind();
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].len == 0 && !unbounded_allowed(k))
        raise(status::invalid_param,
              "register_memory: entry {} has length 0; only file, block and object entries may be "
              "unbounded",
              i);
    std::optional<error> last;
    bool any = false, candidate = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& s = slot<B>();
      if (!s.engine || !contains(typename B::memory_kinds{}, k) ||
          !detail::selected<B>(opt.backends))
        return;
      candidate = true;
      try {
        register_with<B>(list);
        any = true;
      } catch (const error& e) {
        log::warn("agent '{}': {} could not register: {}", name_, B::name, e.what());
        last = e;
      }
    });
    if (!candidate)
      raise(status::not_found,
            "register_memory: no created backend of agent '{}' takes {} memory{}", name_, k,
            opt.backends.empty() ? "" : " among the backends named");
    if (!any) throw *last;
  }

  /// Deregisters entries; each must equal a registered range. Per backend, if one is missing
  /// nothing is deregistered there. Throws `not_found` when an entry was not registered, and
  /// `not_allowed` (deregistering nothing) while a prepared list or a request still points into
  /// one of them: release those first.
  void deregister_memory(const reg_dlist& list, const backend_options& opt = {}) {
    auto g = lock_.exclusive();
    const mem_kind k = list.kind();
    refuse_if_in_use(list, opt);
    bool any = false;
    std::optional<std::size_t> missing;
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& s = slot<B>();
      if (!s.engine || !detail::selected<B>(opt.backends)) return;
      auto& idx = s.regions[static_cast<std::size_t>(k)];
      if (idx.empty()) return;
      for (std::size_t i = 0; i < list.size(); ++i)
        if (idx.find_exact(list[i]) == nullptr) {
          missing = i;
          return;
        }
      for (const auto& d : list) remove_region<B>(k, d);
      any = true;
    });
    if (missing || !any)
      raise(status::not_found,
            "deregister_memory: entry {} of the {} list is not a registered range of agent '{}'; "
            "pass the same (addr, len, dev) that was registered",
            missing.value_or(0), k, name_);
  }

  /// Asks one backend about registration entries (files: size, mode, mtime). Throws
  /// `invalid_param` unless exactly one backend is named, `not_supported` when it cannot answer.
  std::vector<std::optional<params>> query_memory(const reg_dlist& list,
                                                  const backend_options& opt) {
    auto g = lock_.exclusive();
    if (opt.backends.size() != 1)
      raise(status::invalid_param, "query_memory: name exactly one backend (got {})",
            opt.backends.size());
    std::optional<std::vector<std::optional<params>>> r;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (B::name != opt.backends[0]) return;
      if (!slot<B>().engine)
        raise(status::not_found, "query_memory: backend {} was not created", B::name);
      if constexpr (querying_backend<B>)
        r.emplace(slot<B>().engine->query_memory(list.span()));
      else
        raise(status::not_supported, "query_memory: backend {} cannot query memory", B::name);
    });
    if (!r) raise(status::not_found, "query_memory: unknown backend '{}'", opt.backends[0]);
    return std::move(*r);
  }

  // Metadata

  /// Full metadata: connection info and every registration of every remote-capable backend.
  /// Throws `invalid_param` when no remote-capable backend exists.
  std::string local_metadata() const {
    auto g = lock_.exclusive();
    agent_metadata md;
    md.agent = name_;
    bool any = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (remote_backend<B>) {
        auto& s = slot<B>();
        if (!s.engine) return;
        any = true;
        md.connections.push_back({std::string(B::name), s.conn_info});
        for (const auto& idx : s.regions) {
          if (idx.empty()) continue;
          section sec{std::string(B::name), idx.kind(), {}};
          for (const auto& e : idx) sec.regions.push_back({e.range, e.pub});
          md.sections.push_back(std::move(sec));
        }
      }
    });
    if (!any)
      raise(status::invalid_param,
            "local_metadata: agent '{}' has no remote-capable backend; create one (e.g. UCX)",
            name_);
    return encode(md);
  }

  /// Partial metadata: with an empty list, connection info only; otherwise exactly those
  /// registrations (each must match one) and connection info when `include_conn_info`.
  std::string local_partial_metadata(const reg_dlist& list, bool include_conn_info,
                                     const backend_options& opt = {}) const {
    auto g = lock_.exclusive();
    agent_metadata md;
    md.agent = name_;
    md.partial = true;
    bool any = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (remote_backend<B>) {
        auto& s = slot<B>();
        if (!s.engine || !detail::selected<B>(opt.backends)) return;
        if (!list.empty() && !contains(typename B::memory_kinds{}, list.kind())) return;
        any = true;
        if (list.empty() || include_conn_info)
          md.connections.push_back({std::string(B::name), s.conn_info});
        if (list.empty()) return;
        const auto& idx = s.regions[static_cast<std::size_t>(list.kind())];
        section sec{std::string(B::name), list.kind(), {}};
        for (std::size_t i = 0; i < list.size(); ++i) {
          const auto* e = idx.find_exact(list[i]);
          if (e == nullptr)
            raise(status::not_found,
                  "local_partial_metadata: entry {} is not registered with {}; register it first",
                  i, B::name);
          sec.regions.push_back({e->range, e->pub});
        }
        md.sections.push_back(std::move(sec));
      }
    });
    if (!any)
      raise(status::invalid_param,
            "local_partial_metadata: no remote-capable backend of agent '{}' matches", name_);
    return encode(md);
  }

  /// Loads a peer's full or partial metadata and returns its name. Loading is incremental;
  /// identical connection info is accepted again, different info is refused (`not_allowed`),
  /// the agent's own name is refused (`invalid_param`), garbage gives `mismatch`. A peer
  /// loaded after an invalidation gets a new generation.
  std::string load_remote_metadata(std::span<const std::byte> bytes) {
    agent_metadata md = decode_metadata(bytes);
    auto g = lock_.exclusive();
    return load_locked(md);
  }
  std::string load_remote_metadata(std::string_view bytes) {
    return load_remote_metadata(std::as_bytes(std::span(bytes.data(), bytes.size())));
  }

  /// Drops what was loaded about `remote`. Requests built against it fail with `not_found`.
  /// Throws `invalid_param` for the agent's own name, `not_found` for a peer not loaded (or
  /// dropped already by an earlier call). A peer the agent dropped itself because a backend
  /// reported it disconnected is removed quietly, once, so that a shutdown loop over every
  /// peer goes through.
  void invalidate_remote_metadata(std::string_view remote) {
    auto g = lock_.exclusive();
    if (remote == name_)
      raise(status::invalid_param, "invalidate_remote_metadata: '{}' is this agent itself", remote);
    prune();
    auto it = peers_.find(remote);
    if (it == peers_.end()) {
      if (auto d = dropped_.find(remote); d != dropped_.end()) {
        dropped_.erase(d);
        return;
      }
      raise(status::not_found, "invalidate_remote_metadata: no metadata loaded for '{}'", remote);
    }
    it->second->token.valid.store(false, std::memory_order_release);
    peers_.erase(it);
  }

  /// True when `remote`'s metadata is loaded and, if `descs` is not empty, some backend with
  /// its connection info covers all of them.
  bool check_remote_metadata(std::string_view remote, const xfer_dlist& descs = {}) {
    auto g = lock_.exclusive();
    prune();
    auto it = peers_.find(remote);
    if (it == peers_.end()) return false;
    if (descs.empty()) return it->second->token.self || has_any_peer(*it->second);
    bool ok = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (ok) return;
      auto& ps = std::get<peer_slot<B>>(it->second->slots);
      if (!ps.peer) return;
      ok = detail::first_uncovered(ps.regions[static_cast<std::size_t>(descs.kind())], descs) ==
           descs.size();
    });
    return ok;
  }

  /// Generation of a loaded peer (0 when not loaded).
  std::uint64_t remote_generation(std::string_view remote) {
    auto g = lock_.exclusive();
    prune();
    auto it = peers_.find(remote);
    return it == peers_.end() ? 0 : it->second->token.generation;
  }

  /// Names of loaded peers (without the agent itself).
  std::vector<std::string> remote_agents() {
    auto g = lock_.exclusive();
    prune();
    std::vector<std::string> out;
    for (const auto& [n, s] : peers_)
      if (!s->token.self) out.push_back(n);
    return out;
  }

  /// Connects eagerly to a loaded peer on every backend that can (or those named in `opt`).
  /// Throws `not_found` when the peer is not loaded, `backend` when no backend (of those named)
  /// has its connection info.
  void make_connection(std::string_view remote, const backend_options& opt = {}) {
    auto g = lock_.exclusive();
    auto st = find_peer(remote, "make_connection");
    bool any = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& ps = std::get<peer_slot<B>>(st->slots);
      if (!ps.peer || !detail::selected<B>(opt.backends)) return;
      any = true;
      if constexpr (connecting_backend<B>) slot<B>().engine->connect(*ps.peer);
    });
    if (!any)
      raise(status::backend,
            "make_connection: no backend{} of agent '{}' has connection info for '{}'",
            opt.backends.empty() ? "" : " among those named", name_, remote);
  }

  // Notifications

  /// Appends notifications that arrived, per sender agent, from every backend (or those named
  /// in `opt`). Throws `backend` when no created backend (of those named) delivers them.
  void notifications(notif_map& out, const backend_options& opt = {}) {
    auto g = lock_.exclusive();
    bool any = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (notifying_backend<B>) {
        if (auto& s = slot<B>(); s.engine && detail::selected<B>(opt.backends)) {
          any = true;
          s.engine->take_notifications(out);
        }
      }
    });
    if (!any)
      raise(status::backend, "notifications: no created backend{} of agent '{}' delivers them",
            opt.backends.empty() ? "" : " among those named", name_);
  }
  /// Returns the notifications that arrived (a convenience over the appending form).
  notif_map notifications() {
    notif_map m;
    notifications(m);
    return m;
  }

  /// Sends a standalone notification to `remote` (or to this agent itself). Throws `not_found`
  /// when no notifying backend has a connection to it.
  void notify(std::string_view remote, std::string_view msg, const backend_options& opt = {}) {
    auto g = lock_.shared();
    auto st = find_peer(remote, "notify");
    bool sent = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (notifying_backend<B>) {
        if (sent || !detail::selected<B>(opt.backends)) return;
        auto& ps = std::get<peer_slot<B>>(st->slots);
        if (!ps.peer || !slot<B>().engine) return;
        slot<B>().engine->notify(*ps.peer, msg);
        sent = true;
      }
    });
    if (!sent)
      raise(status::not_found, "notify: no notifying backend of agent '{}' reaches '{}'", name_,
            remote);
  }

  // Transfers

  /// Resolves a list once: `remote` empty for the local (initiator) side, a peer's name for its
  /// side, the agent's own name for a loopback target. Throws `not_found` naming the first
  /// descriptor no backend covers, or an unknown peer.
  prepared prepare_list(std::string_view remote, const xfer_dlist& list,
                        const backend_options& opt = {}) {
    auto g = lock_.shared();
    prepared p;
    p.agent_ = std::string(remote);
    p.local_ = remote.empty();
    p.kind_ = list.kind();
    p.count_ = list.size();
    std::size_t worst = list.size();
    bool any = false;
    detail::region_pins pins;
    if (p.local_) {
      detail::for_each_type<Backends...>([&]<class B>() {
        auto& s = slot<B>();
        if (!s.engine || !detail::selected<B>(opt.backends)) return;
        auto v =
            detail::bind_all(s.regions[static_cast<std::size_t>(list.kind())], list, worst, pins);
        if (v) {
          std::get<typename prepared::template local_vec<B>>(p.local_descs_) = std::move(v);
          any = true;
        }
      });
    } else {
      p.peer_ = find_peer(remote, "prepare_list");
      detail::for_each_type<Backends...>([&]<class B>() {
        auto& ps = std::get<peer_slot<B>>(p.peer_->slots);
        if (!ps.peer || !detail::selected<B>(opt.backends)) return;
        auto v =
            detail::bind_all(ps.regions[static_cast<std::size_t>(list.kind())], list, worst, pins);
        if (v) {
          std::get<typename prepared::template remote_vec<B>>(p.remote_descs_) = std::move(v);
          any = true;
        }
      });
    }
    if (!any) uncovered_error("prepare_list", list, worst, remote);
    p.pins_ = detail::pinned(std::move(pins));
    return p;
  }
  prepared prepare_list(const xfer_dlist& list, const backend_options& opt = {}) {
    return prepare_list({}, list, opt);
  }
  template <kind_tag K>
  typed_prepared<K> prepare_list(std::string_view remote, const xfer_list<K>& list,
                                 const backend_options& opt = {}) {
    return typed_prepared<K>(prepare_list(remote, static_cast<const xfer_dlist&>(list), opt));
  }

  /// Makes a request from index vectors into two prepared lists (local, then remote side).
  /// Runs contiguous on both sides merge unless `opt.skip_merge`. Throws `invalid_param` for
  /// mismatched counts, indices out of range or lengths that differ, `not_found` when the peer
  /// was invalidated or no backend is common to both lists.
  xfer_request make_request(xfer_op op, const prepared& local, std::span<const int> local_idx,
                            const prepared& remote, std::span<const int> remote_idx,
                            const xfer_options& opt = {}) {
    check_indices(local, local_idx, remote, remote_idx);
    auto g = lock_.shared();
    std::optional<xfer_request> out;
    for_candidates(local.kind(), remote.kind(), *remote.peer_, opt.backends, [&]<class B>() {
      if (!local.template has<B>() || !remote.template has<B>()) return false;
      out.emplace(build<B>(op, local, local_idx, remote, remote_idx, opt));
      return true;
    });
    if (!out)
      raise(
          status::not_found,
          "make_request: no backend resolved both lists ({} -> {} with '{}'); prepare them with a "
          "backend that moves both kinds",
          local.kind(), remote.kind(), remote.agent_name());
    return std::move(*out);
  }

  /// Typed form: the backend is chosen at compile time, the request is `request<B>`.
  template <kind_tag L, kind_tag R>
  auto make_request(xfer_op op, const typed_prepared<L>& local, std::span<const int> local_idx,
                    const typed_prepared<R>& remote, std::span<const int> remote_idx,
                    const xfer_options& opt = {})
      -> request<detail::select_backend_t<L, R, Backends...>> {
    using B = detail::select_backend_t<L, R, Backends...>;
    check_indices(local, local_idx, remote, remote_idx);
    auto g = lock_.shared();
    require_usable<B>(*remote.peer_);
    if (!local.template has<B>() || !remote.template has<B>())
      raise(status::not_found, "make_request: the lists were not resolved by backend {}", B::name);
    return build<B>(op, local, local_idx, remote, remote_idx, opt);
  }

  /// One-shot request from two lists (local, then the remote agent's). Throws `invalid_param`
  /// for different counts or lengths, `not_found` when a descriptor lies outside every
  /// registered region or the peer is unknown.
  xfer_request create_request(xfer_op op, const xfer_dlist& local, const xfer_dlist& remote,
                              std::string_view remote_agent, const xfer_options& opt = {}) {
    detail::check_pairs(local, remote);
    auto g = lock_.shared();
    auto st = find_peer(remote_agent, "create_request");
    std::optional<xfer_request> out;
    std::size_t worst_l = local.size(), worst_r = remote.size();
    for_candidates(local.kind(), remote.kind(), *st, opt.backends, [&]<class B>() {
      detail::region_pins pins;
      auto l = detail::bind_all(slot<B>().regions[static_cast<std::size_t>(local.kind())], local,
                                worst_l, pins);
      if (!l) return false;
      auto& ps = std::get<peer_slot<B>>(st->slots);
      auto r = detail::bind_all(ps.regions[static_cast<std::size_t>(remote.kind())], remote,
                                worst_r, pins);
      if (!r) return false;
      out.emplace(
          finish<B>(op, std::move(*l), std::move(*r), st, opt, detail::pinned(std::move(pins))));
      return true;
    });
    if (!out) {
      if (worst_l < local.size()) uncovered_error("create_request", local, worst_l, {});
      if (worst_r < remote.size()) uncovered_error("create_request", remote, worst_r, remote_agent);
      raise(status::not_found,
            "create_request: no created backend moves {} -> {} to '{}'; create one that does",
            local.kind(), remote.kind(), remote_agent);
    }
    return std::move(*out);
  }

  /// Typed one-shot request: the backend is chosen at compile time.
  template <kind_tag L, kind_tag R>
  auto create_request(xfer_op op, const xfer_list<L>& local, const xfer_list<R>& remote,
                      std::string_view remote_agent, const xfer_options& opt = {})
      -> request<detail::select_backend_t<L, R, Backends...>> {
    using B = detail::select_backend_t<L, R, Backends...>;
    detail::check_pairs(local, remote);
    auto g = lock_.shared();
    auto st = find_peer(remote_agent, "create_request");
    require_usable<B>(*st);
    std::size_t worst = local.size();
    detail::region_pins pins;
    auto l =
        detail::bind_all(slot<B>().regions[static_cast<std::size_t>(L::value)], local, worst, pins);
    if (!l) uncovered_error("create_request", local, worst, {});
    worst = remote.size();
    auto& ps = std::get<peer_slot<B>>(st->slots);
    auto r = detail::bind_all(ps.regions[static_cast<std::size_t>(R::value)], remote, worst, pins);
    if (!r) uncovered_error("create_request", remote, worst, remote_agent);
    return finish<B>(op, std::move(*l), std::move(*r), st, opt, detail::pinned(std::move(pins)));
  }

  /// The backend's estimate of a request's duration, when it offers one.
  template <class B>
  std::optional<std::chrono::microseconds> estimate_cost(const request<B>& r) const {
    if constexpr (estimating_backend<B>) {
      if (!r.valid()) return std::nullopt;
      return r.engine().estimate(r.backend_state());
    } else {
      return std::nullopt;
    }
  }
  std::optional<std::chrono::microseconds> estimate_cost(const xfer_request& r) const {
    std::optional<std::chrono::microseconds> out;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (auto* t = r.template get_if<B>()) out = estimate_cost(*t);
    });
    return out;
  }

 private:
  template <class B>
  backend_slot<B>& slot() const noexcept {
    return const_cast<backend_slot<B>&>(std::get<backend_slot<B>>(slots_));
  }

  peer_state& self_state() {
    auto it = peers_.find(name_);
    if (it == peers_.end()) {
      auto st = std::make_shared<peer_state>();
      st->token.name = name_;
      st->token.self = true;
      st->token.generation = ++generation_;
      it = peers_.emplace(name_, std::move(st)).first;
    }
    return *it->second;
  }

  template <class B>
  void register_with(const reg_dlist& list) {
    auto& s = slot<B>();
    const mem_kind k = list.kind();
    auto& idx = s.regions[static_cast<std::size_t>(k)];
    std::size_t done = 0;
    try {
      for (; done < list.size(); ++done) {
        const reg_desc& d = list[done];
        if (idx.find_exact(d) != nullptr)
          raise(status::invalid_param,
                "register_memory: entry {} (addr {:#x}, len {}, dev {}) is registered already with "
                "{}",
                done, d.addr, d.len, d.dev, B::name);
        auto r = s.engine->register_region(k, d);
        std::string pub;
        if constexpr (remote_backend<B>) {
          try {
            pub = std::string(s.engine->public_data(r));
          } catch (...) {
            s.engine->deregister_region(r);
            throw;
          }
        }
        auto& stored = idx.insert(d, d.meta, std::move(pub), std::move(r));
        if constexpr (loopback_backend<B>) {
          auto& ps = std::get<peer_slot<B>>(self_state().slots);
          try {
            auto rr = s.engine->load_local(stored);
            ps.regions[static_cast<std::size_t>(k)].insert(d, {}, {}, std::move(rr));
          } catch (...) {
            auto owned = idx.erase(d);
            s.engine->deregister_region(*owned);
            throw;
          }
        }
      }
    } catch (...) {
      for (std::size_t i = 0; i < done; ++i) remove_region<B>(k, list[i]);
      throw;
    }
  }

  /// Throws `not_allowed` when a selected backend's region for an entry (or its loopback view)
  /// is still used by a prepared list or a request.
  void refuse_if_in_use(const reg_dlist& list, const backend_options& opt) {
    const auto k = static_cast<std::size_t>(list.kind());
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& s = slot<B>();
      if (!s.engine || !detail::selected<B>(opt.backends)) return;
      const detail::region_index<typename B::remote_region>* self = nullptr;
      if constexpr (loopback_backend<B>) {
        if (auto it = peers_.find(name_); it != peers_.end())
          self = &std::get<peer_slot<B>>(it->second->slots).regions[k];
      }
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto* e = s.regions[k].find_exact(list[i]);
        const auto* v = self != nullptr ? self->find_exact(list[i]) : nullptr;
        if ((e != nullptr && e->in_use()) || (v != nullptr && v->in_use()))
          raise(status::not_allowed,
                "deregister_memory: entry {} (addr {:#x}, len {}, dev {}) of agent '{}' is still "
                "used by a prepared list or a transfer request ({}); release them first "
                "(release_dlist_handle / release_xfer_handle), then deregister",
                i, list[i].addr, list[i].len, list[i].dev, name_, B::name);
      }
    });
  }

  template <class B>
  void remove_region(mem_kind k, const desc& d) noexcept {
    auto& s = slot<B>();
    if constexpr (loopback_backend<B>) {
      auto it = peers_.find(name_);
      if (it != peers_.end()) {
        auto& ps = std::get<peer_slot<B>>(it->second->slots);
        if (auto rr = ps.regions[static_cast<std::size_t>(k)].erase(d))
          s.engine->unload_region(*rr);
      }
    }
    if (auto r = s.regions[static_cast<std::size_t>(k)].erase(d)) s.engine->deregister_region(*r);
  }

  /// Drops peers that a backend reported dead, remembering their names so that removing one
  /// afterwards succeeds (see invalidate_remote_metadata).
  void prune() {
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (!it->second->token.valid.load(std::memory_order_acquire)) {
        if (it->second->token.disconnected.load(std::memory_order_acquire))
          dropped_.insert(it->first);
        it = peers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  static bool has_any_peer(const peer_state& st) {
    bool any = false;
    detail::for_each_type<Backends...>([&]<class B>() {
      if (std::get<peer_slot<B>>(st.slots).peer) any = true;
    });
    return any;
  }

  std::shared_ptr<peer_state> find_peer(std::string_view remote, std::string_view call) {
    if (remote == name_) return self_shared(call);
    auto it = peers_.find(remote);
    if (it == peers_.end() || !it->second->token.valid.load(std::memory_order_acquire))
      raise(status::not_found,
            "{}: no metadata loaded for agent '{}'; load it with load_remote_metadata or fetch it",
            call, remote);
    return it->second;
  }
  std::shared_ptr<peer_state> self_shared(std::string_view call) {
    auto it = peers_.find(name_);
    if (it == peers_.end())
      raise(status::not_found, "{}: agent '{}' has no loopback-capable backend", call, name_);
    return it->second;
  }

  [[noreturn]] void uncovered_error(std::string_view call, const xfer_dlist& list, std::size_t i,
                                    std::string_view remote) const {
    if (list.empty()) raise(status::invalid_param, "{}: the descriptor list is empty", call);
    const desc& d = list[std::min(i, list.size() - 1)];
    raise(
        status::not_found,
        "{}: {} descriptor {} (addr {:#x}, len {}, dev {}) lies outside every region registered "
        "{}; register the memory first{}",
        call, list.kind(), i, d.addr, d.len, d.dev,
        remote.empty() ? fmt::format("by agent '{}'", name_) : fmt::format("by agent '{}'", remote),
        remote.empty() || remote == name_ ? "" : " and reload its metadata");
  }

  static void check_indices(const prepared& l, std::span<const int> li, const prepared& r,
                            std::span<const int> ri) {
    if (!l.is_local())
      raise(status::invalid_param,
            "make_request: the first list was prepared for agent '{}'; prepare it with an empty "
            "agent name (local side)",
            l.agent_name());
    if (r.is_local())
      raise(status::invalid_param,
            "make_request: the second list was prepared for the local side; prepare it for the "
            "remote agent (or this agent's own name for loopback)");
    if (li.empty() || li.size() != ri.size())
      raise(status::invalid_param,
            "make_request: {} local and {} remote indices; give equal, non-zero counts", li.size(),
            ri.size());
    for (std::size_t i = 0; i < li.size(); ++i) {
      if (li[i] < 0 || static_cast<std::size_t>(li[i]) >= l.size())
        raise(status::invalid_param,
              "make_request: local index {} (position {}) is out of range 0..{}", li[i], i,
              l.size());
      if (ri[i] < 0 || static_cast<std::size_t>(ri[i]) >= r.size())
        raise(status::invalid_param,
              "make_request: remote index {} (position {}) is out of range 0..{}", ri[i], i,
              r.size());
    }
    if (!r.peer_->token.valid.load(std::memory_order_acquire))
      raise(
          status::not_found,
          "make_request: agent '{}' was invalidated after the list was prepared; prepare it again",
          r.agent_name());
  }

  /// Calls `f.template operator()<B>()` for candidate backends in preference order until it
  /// returns true: the backends named in `names`, in that order; else those that prefer the
  /// pair (nixl::prefers), then the others, each group in type order. A candidate that throws
  /// `not_supported` (it cannot reach that peer) passes to the next; the refusal is rethrown
  /// when no other candidate takes the request.
  template <class F>
  void for_candidates(mem_kind lk, mem_kind rk, const peer_state& st,
                      const std::vector<std::string>& names, F&& f) {
    std::optional<error> refused;
    auto try_one = [&]<class B>() {
      if (!slot<B>().engine || !moves<B>(lk, rk)) return false;
      if (!std::get<peer_slot<B>>(st.slots).peer) return false;
      try {
        return static_cast<bool>(f.template operator()<B>());
      } catch (const error& e) {
        if (e.status_code() != status::not_supported) throw;
        refused = e;
        return false;
      }
    };
    bool done = false;
    if (names.empty()) {
      for (const bool preferred : {true, false})
        detail::for_each_type<Backends...>([&]<class B>() {
          if (!done && prefers<B>(lk, rk) == preferred) done = try_one.template operator()<B>();
        });
    } else {
      for (const auto& n : names) {
        detail::for_each_type<Backends...>([&]<class B>() {
          if (!done && B::name == n) done = try_one.template operator()<B>();
        });
        if (done) break;
      }
    }
    if (!done && refused) throw *refused;
  }

  template <class B>
  void require_usable(const peer_state& st) const {
    if (!slot<B>().engine)
      raise(status::not_found, "backend {} was not created in agent '{}'; call create_backend",
            B::name, name_);
    if (!std::get<peer_slot<B>>(st.slots).peer)
      raise(status::not_found, "backend {} has no connection to agent '{}'", B::name,
            st.token.name);
  }

  template <class B>
  request<B> build(xfer_op op, const prepared& local, std::span<const int> li,
                   const prepared& remote, std::span<const int> ri, const xfer_options& opt) {
    const auto& lv = *std::get<typename prepared::template local_vec<B>>(local.local_descs_);
    const auto& rv = *std::get<typename prepared::template remote_vec<B>>(remote.remote_descs_);
    std::vector<bound_desc<typename B::region>> l;
    std::vector<bound_desc<typename B::remote_region>> r;
    l.reserve(li.size());
    r.reserve(ri.size());
    for (std::size_t i = 0; i < li.size(); ++i) {
      const auto& a = lv[static_cast<std::size_t>(li[i])];
      const auto& b = rv[static_cast<std::size_t>(ri[i])];
      if (a.len != b.len)
        raise(status::invalid_param, "make_request: pair {} has length {} locally and {} remotely",
              i, a.len, b.len);
      l.push_back(a);
      r.push_back(b);
    }
    return finish<B>(op, std::move(l), std::move(r), remote.peer_, opt, local.pins_, remote.pins_);
  }

  /// Merges neighbours contiguous on both sides, then lets the backend prepare.
  template <class B>
  request<B> finish(xfer_op op, std::vector<bound_desc<typename B::region>> l,
                    std::vector<bound_desc<typename B::remote_region>> r,
                    const std::shared_ptr<peer_state>& st, const xfer_options& opt,
                    std::shared_ptr<const void> pins, std::shared_ptr<const void> more_pins = {}) {
    std::size_t total = 0;
    for (const auto& d : l) total += d.len;
    if (!opt.skip_merge) detail::merge_contiguous(l, r);
    request<B> req;
    auto& ps = std::get<peer_slot<B>>(st->slots);
    const std::span<const bound_desc<typename B::region>> ls(l);
    const std::span<const bound_desc<typename B::remote_region>> rs(r);
    // A backend that reads NIXL's customParam takes it as a sixth argument.
    if constexpr (requires {
                    slot<B>().engine->prepare(req.state_, op, ls, rs, *ps.peer,
                                              std::string_view(opt.custom));
                  })
      slot<B>().engine->prepare(req.state_, op, ls, rs, *ps.peer, std::string_view(opt.custom));
    else
      slot<B>().engine->prepare(req.state_, op, ls, rs, *ps.peer);
    req.engine_ = slot<B>().engine.get();
    req.lock_ = &lock_;
    req.peer_ = std::shared_ptr<detail::peer_token>(st, &st->token);
    req.op_ = op;
    req.telemetry_on_ = telemetry_;
    req.telem_.total_bytes = total;
    req.telem_.desc_count = l.size();  // after merging, as NIXL counts
    req.backend_descs_ = l.size();
    req.pins_ = std::move(pins);
    req.more_pins_ = std::move(more_pins);
    req.notif_.reserve(opt.notif_capacity);
    if (opt.notif) {
      req.has_notif_ = true;
      req.notif_ = *opt.notif;
    }
    return req;
  }

  std::string load_locked(const agent_metadata& md) {
    if (md.agent == name_)
      raise(status::invalid_param,
            "load_remote_metadata: the metadata is this agent's own ('{}'); load a peer's", name_);
    prune();
    auto it = peers_.find(md.agent);
    const bool fresh = it == peers_.end();
    std::shared_ptr<peer_state> st;
    if (fresh) {
      st = std::make_shared<peer_state>();
      st->token.name = md.agent;
      st->token.generation = ++generation_;
    } else {
      st = it->second;
    }
    // Check everything before changing anything.
    bool matched = false;
    for (const auto& c : md.connections) {
      detail::for_each_type<Backends...>([&]<class B>() {
        if constexpr (remote_backend<B>) {
          if (B::name != c.backend || !slot<B>().engine) return;
          matched = true;
          auto& ps = std::get<peer_slot<B>>(st->slots);
          if (ps.peer && ps.conn_info != c.info)
            raise(status::not_allowed,
                  "load_remote_metadata: agent '{}' sent new {} connection info while loaded; "
                  "invalidate it first",
                  md.agent, B::name);
        }
      });
    }
    for (const auto& sec : md.sections) {
      detail::for_each_type<Backends...>([&]<class B>() {
        if constexpr (remote_backend<B>) {
          if (B::name != sec.backend || !slot<B>().engine) return;
          matched = true;
          if (!contains(typename B::memory_kinds{}, sec.kind))
            raise(status::mismatch, "load_remote_metadata: {} does not move {} memory", B::name,
                  sec.kind);
          auto& ps = std::get<peer_slot<B>>(st->slots);
          bool has_conn = ps.peer.has_value();
          for (const auto& c : md.connections) has_conn = has_conn || c.backend == B::name;
          if (!has_conn)
            raise(
                status::not_found,
                "load_remote_metadata: regions of '{}' for {} arrived before its connection info; "
                "send metadata with connection info first",
                md.agent, B::name);
          const auto& idx = ps.regions[static_cast<std::size_t>(sec.kind)];
          for (const auto& r : sec.regions)
            if (const auto* e = idx.find_exact(r.range); e != nullptr && e->pub != r.data)
              raise(status::not_allowed,
                    "load_remote_metadata: agent '{}' changed the public data of a loaded region "
                    "(addr {:#x}); invalidate it first",
                    md.agent, r.range.addr);
        }
      });
    }
    if (!matched && fresh)
      raise(status::backend, "load_remote_metadata: agent '{}' shares no backend with agent '{}'",
            md.agent, name_);
    // Apply, undoing this call's additions on failure.
    std::vector<std::function<void()>> undo;
    try {
      for (const auto& c : md.connections) {
        detail::for_each_type<Backends...>([&]<class B>() {
          if constexpr (remote_backend<B>) {
            if (B::name != c.backend || !slot<B>().engine) return;
            auto& ps = std::get<peer_slot<B>>(st->slots);
            if (ps.peer) return;
            auto bytes = std::as_bytes(std::span(c.info.data(), c.info.size()));
            ps.peer.emplace(slot<B>().engine->load_peer(md.agent, bytes));
            ps.engine = slot<B>().engine.get();
            ps.conn_info = c.info;
            undo.push_back([&ps] { peer_state::unload(ps); });
          }
        });
      }
      for (const auto& sec : md.sections) {
        detail::for_each_type<Backends...>([&]<class B>() {
          if constexpr (remote_backend<B>) {
            if (B::name != sec.backend || !slot<B>().engine) return;
            auto& ps = std::get<peer_slot<B>>(st->slots);
            auto& idx = ps.regions[static_cast<std::size_t>(sec.kind)];
            for (const auto& r : sec.regions) {
              if (idx.find_exact(r.range) != nullptr) continue;
              auto bytes = std::as_bytes(std::span(r.data.data(), r.data.size()));
              auto rr = slot<B>().engine->unpack(*ps.peer, sec.kind, r.range, bytes);
              idx.insert(r.range, {}, r.data, std::move(rr));
              undo.push_back([&idx, &ps, range = r.range] {
                if (auto x = idx.erase(range)) ps.engine->unload_region(*x);
              });
            }
          }
        });
      }
    } catch (...) {
      for (auto u = undo.rbegin(); u != undo.rend(); ++u) (*u)();
      throw;
    }
    if (fresh) {
      if (auto d = dropped_.find(md.agent); d != dropped_.end()) dropped_.erase(d);
      peers_.emplace(md.agent, std::move(st));
    }
    log::info("agent '{}': loaded metadata of '{}'", name_, md.agent);
    return md.agent;
  }

  std::string name_;
  agent_config cfg_;
  detail::agent_lock lock_;
  bool telemetry_ = false;
  std::uint64_t generation_ = 0;
  std::tuple<backend_slot<Backends>...> slots_;
  std::map<std::string, std::shared_ptr<peer_state>, std::less<>> peers_;
  std::set<std::string, std::less<>> dropped_;  ///< peers pruned as disconnected, not removed yet
};

}  // namespace nixl
