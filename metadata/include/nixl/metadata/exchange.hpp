#pragma once
/// Metadata exchange of one agent: a peer-to-peer listener speaking a small framed protocol
/// over TCP, and an optional etcd central store.
///
/// The exchange is a layer above the core: it drives an agent through the agent's public calls
/// (local_metadata, local_partial_metadata, load_remote_metadata, invalidate_remote_metadata),
/// type-erased into `hooks`, and the core includes nothing from here:
///
///   nixl::agent<nixl::ucx::backend> a{"A"};
///   nixl::metadata::exchange x{a, {.listen = true, .listen_port = 0}};
///   a.create_backend<nixl::ucx::backend>();
///   x.send_local_metadata(nixl::metadata::target::peer("127.0.0.1", port)).get();
///
/// An exchange must be destroyed before its agent (declare it after the agent). Operations are
/// asynchronous: they validate on the caller's thread, queue the I/O to the exchange's threads
/// and return a std::future that becomes ready when the operation completed (or holds the
/// nixl::error that ended it). Errors on the exchange threads are also logged. Callers that do
/// not keep the future observe completion the NIXL way, by polling check_remote_metadata.
///
/// Threads: when the config listens or names etcd endpoints, the exchange runs an I/O thread
/// (listener and outgoing peer requests) and, with etcd, an etcd thread (requests, lease
/// keep-alive, watches). The hooks are then called from those threads, so the agent must lock
/// (thread_sync none becomes strict). Without threads, peer requests run to completion on the
/// caller's thread inside send()/fetch()/invalidate_at() and the returned future is ready.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nixl/agent_config.hpp>
#include <nixl/memory.hpp>
#include <nixl/metadata/frame.hpp>

namespace nixl::metadata {

/// NIXL's default listener port.
inline constexpr std::uint16_t default_listen_port = 8888;
/// Address the listener binds unless told otherwise: loopback, never exposed by default.
inline constexpr std::string_view default_listen_address = "127.0.0.1";
/// Label of full metadata in the central store.
inline constexpr std::string_view full_label = "metadata";

/// Where a metadata call goes: a peer's listener (`ip`, `port`) or, with an empty `ip`, the
/// central store (etcd) under `label` (empty: "metadata" for full metadata).
struct target {
  std::string ip;
  std::uint16_t port = default_listen_port;
  std::string label;

  static target peer(std::string ip, std::uint16_t port = default_listen_port) {
    return {std::move(ip), port, {}};
  }
  static target central(std::string label = {}) { return {{}, 0, std::move(label)}; }
  bool is_peer() const noexcept { return !ip.empty(); }
};

/// What the exchange needs from its agent. Called from the exchange's own threads (or from the
/// caller's thread when the exchange runs none).
struct hooks {
  /// Our full metadata blob; may throw nixl::error (e.g. no remote-capable backend).
  std::function<std::string()> full_metadata;
  /// Loads a peer's blob (full or partial) and returns the agent name inside; throws nixl::error.
  std::function<std::string(std::span<const std::byte>)> load;
  /// Drops a peer's metadata (the peer asked for it, or its etcd keys went away).
  std::function<void(std::string_view agent)> invalidate;
  /// Our partial metadata blob (optional: send_partial_metadata throws not_supported without).
  std::function<std::string(const reg_dlist&, bool include_conn_info, const backend_options&)>
      partial_metadata;

  /// The hooks of an agent (any `nixl::agent<...>`): its public metadata calls.
  template <class Agent>
  static hooks of(Agent& a) {
    return {
        [&a] { return a.local_metadata(); },
        [&a](std::span<const std::byte> b) { return a.load_remote_metadata(b); },
        [&a](std::string_view remote) { a.invalidate_remote_metadata(remote); },
        [&a](const reg_dlist& l, bool conn, const backend_options& o) {
          return a.local_partial_metadata(l, conn, o);
        },
    };
  }
};

/// Settings of one exchange.
struct config {
  /// Run a listener so that peers can send, fetch and invalidate.
  bool listen = false;
  /// Address to bind: a numeric IPv4 or IPv6 address of this host ("10.0.0.5", "::1"),
  /// "0.0.0.0" (every IPv4 address) or "::" (every address, IPv4 included). Empty:
  /// NIXL_LISTEN_ADDRESS if read_env and set, else 127.0.0.1. A value that is not an address
  /// is an error when the exchange is created.
  std::string listen_address;
  /// Port to bind; 0 lets the system pick one (see exchange::port()).
  std::uint16_t listen_port = default_listen_port;
  /// Shared secret of the peer-to-peer protocol. Set: the listener accepts only requests
  /// authenticated with it (HMAC-SHA256, fresh nonce and timestamp; replays refused) and our
  /// requests and replies are authenticated. Empty: NIXL_METADATA_SECRET if read_env and set,
  /// else plain frames. See docs/metadata-exchange.md.
  std::string metadata_secret;
  /// Bound on one peer request (connect, send, reply) and on the time a client of our listener
  /// may take to deliver a frame or stay silent.
  std::chrono::milliseconds io_timeout{5000};
  /// Largest frame payload accepted from a peer.
  std::size_t max_frame = default_max_frame;
  /// Most client connections the listener serves at once; more are closed on accept.
  std::size_t max_connections = 256;

  /// Comma-separated etcd client URLs ("http://127.0.0.1:2379" or "127.0.0.1:2379"). Empty:
  /// NIXL_ETCD_ENDPOINTS if read_env, else no central store.
  std::string etcd_endpoints;
  /// Key prefix; empty: NIXL_ETCD_NAMESPACE if read_env and set, else "/nixl/agents". Trailing
  /// slashes are dropped, so keys are "<namespace>/<agent>/<label>".
  std::string etcd_namespace;
  /// How long fetch_central waits for a key that is not there yet.
  std::chrono::microseconds etcd_watch_timeout{5'000'000};
  /// TTL of the lease that carries our keys; kept alive at a third of it. etcd rounds values
  /// below its minimum (2 s with default settings) up.
  std::chrono::seconds etcd_lease_ttl{10};
  /// Bound on one etcd request.
  std::chrono::milliseconds etcd_request_timeout{5000};
  /// PyTorch c10d TCPStore as the central store, "host:port" (tcpstore.hpp). Empty:
  /// NIXL_TCPSTORE_ENDPOINT if read_env, else none. Cannot be combined with etcd_endpoints.
  std::string tcpstore_endpoint;
  /// First-connect budget, and how long a fetch keeps probing for a missing key
  /// (NIXL_TCPSTORE_TIMEOUT_MS).
  std::chrono::milliseconds tcpstore_timeout{30000};
  /// Bound on one TCPStore request and on every reconnect (NIXL_TCPSTORE_OP_TIMEOUT_MS).
  std::chrono::milliseconds tcpstore_op_timeout{5000};
  /// Fill listen_address / metadata_secret / etcd_endpoints / etcd_namespace /
  /// tcpstore_endpoint (and its NIXL_TCPSTORE_*TIMEOUT_MS) from the environment when empty.
  bool read_env = true;

  /// A copy with the environment applied and the namespace normalised.
  config resolved() const;
  /// True when an exchange built from this config runs threads of its own, so the hooks are
  /// called concurrently with the agent's users.
  bool runs_threads() const;
};

/// Counters of the listener, for diagnostics and tests.
struct listener_stats {
  std::uint64_t accepted = 0;   ///< client connections accepted
  std::uint64_t served = 0;     ///< requests answered
  std::uint64_t rejected = 0;   ///< connections closed for malformed, truncated or excess input
  std::uint64_t timed_out = 0;  ///< connections closed because the client was silent or slow
};

/// The metadata exchange of one agent.
class exchange {
 public:
  /// Starts the listener (if cfg.listen) and the threads. Throws nixl::error when the listener
  /// cannot bind or a hook is missing.
  exchange(std::string agent_name, config cfg, hooks h);
  /// The exchange of `a`: its hooks are a's public metadata calls. When the exchange runs
  /// threads, `a`'s `thread_sync::none` becomes `strict` (agent::require_locking). `a` must
  /// outlive the exchange.
  template <class Agent>
  explicit exchange(Agent& a, config cfg = {})
      : exchange(a.name(), locking(a, std::move(cfg)), hooks::of(a)) {}
  /// Stops the threads (pending operations fail with status::canceled) and revokes our etcd
  /// lease, so our central keys disappear at once. Must not run while the caller holds a lock
  /// that the hooks take.
  ~exchange();
  exchange(const exchange&) = delete;
  exchange& operator=(const exchange&) = delete;

  const std::string& agent_name() const noexcept;
  /// Port the listener is bound to (useful with listen_port 0); 0 without a listener.
  std::uint16_t port() const noexcept;
  /// True when the exchange runs threads (see config::runs_threads).
  bool runs_threads() const noexcept;
  /// True when an etcd central store is configured.
  bool has_central() const noexcept;
  /// The effective configuration.
  const config& settings() const noexcept;

  /// Sends a metadata blob (full or partial) to the listener at ip:port, which loads it.
  std::future<void> send(std::string_view ip, std::uint16_t port, std::string blob);
  /// Asks the listener at ip:port for its full metadata and loads the reply. With a non-empty
  /// `expected_agent` the peer refuses if it is another agent.
  std::future<void> fetch(std::string_view ip, std::uint16_t port,
                          std::string_view expected_agent = {});
  /// Tells the listener at ip:port to drop our metadata.
  std::future<void> invalidate_at(std::string_view ip, std::uint16_t port);

  /// Stores a blob under "<namespace>/<agent>/<label>", attached to our lease. Throws
  /// nixl::error(not_supported) without a central store.
  std::future<void> publish(std::string_view label, std::string blob);
  /// Loads "<namespace>/<agent>/<label>", waiting up to etcd_watch_timeout for it to appear,
  /// then watches that agent's keys and invalidates it locally when they are deleted or expire.
  std::future<void> fetch_central(std::string_view agent, std::string_view label = full_label);
  /// Deletes all our keys; watching peers drop us.
  std::future<void> unpublish();

  // Agent-level calls (NIXL's sendLocalMD, fetchRemoteMD, ...). Each validates and serialises
  // on the caller's thread, then queues the I/O. The future may be dropped and completion
  // observed with agent::check_remote_metadata, as in NIXL.

  /// Sends full metadata to a peer's listener, or publishes it in the central store under
  /// "<namespace>/<agent>/metadata".
  std::future<void> send_local_metadata(const target& t = {});
  /// Sends partial metadata (see agent::local_partial_metadata) to a peer, or publishes it in
  /// the central store under `t.label`, which is then required.
  std::future<void> send_partial_metadata(const reg_dlist& descs, bool include_conn_info,
                                          const target& t, const backend_options& opt = {});
  /// Fetches `remote`'s full metadata from its listener, or its `t.label` (default "metadata")
  /// from the central store, waiting up to etcd_watch_timeout for it to appear and then
  /// dropping `remote` when its keys go away.
  std::future<void> fetch_remote_metadata(std::string_view remote, const target& t = {});
  /// Tells a peer's listener to drop this agent, or deletes this agent's keys from the central
  /// store (peers that fetched them from there drop it).
  std::future<void> invalidate_local_metadata(const target& t = {});

  /// Listener counters.
  listener_stats stats() const noexcept;

  /// Key of an agent's label in the central store.
  std::string central_key(std::string_view agent, std::string_view label) const;

  struct impl;

 private:
  template <class Agent>
  static config locking(Agent& a, config cfg) {
    if (cfg.runs_threads()) a.require_locking();
    return cfg;
  }
  void central_or_throw(std::string_view call) const;

  std::unique_ptr<impl> impl_;
};

}  // namespace nixl::metadata
