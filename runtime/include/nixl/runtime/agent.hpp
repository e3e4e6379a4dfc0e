#pragma once
/// `nixl::runtime`: the run-time facade over one agent of every backend this build links, the
/// one layer that NIXL's APIs adapt (python/: the module `nixl._bindings`; compat/: nixl.h and
/// libnixl_capi.so). It holds what a run-time caller needs and the compile-time agent does not
/// give directly:
///
///   - the agent and its metadata exchange, built from NIXL's agent configuration, and torn
///     down in the one safe order (handles, then the exchange, then the agent);
///   - handles: the backends created (by name, with what each supports), the prepared lists
///     and the requests handed out, each owned here until released or until the agent goes;
///   - string options: backend handles to backend names, memory kinds by NIXL's number;
///   - the metadata exchange by address (ip, port, label), or not_supported in a build
///     without it.
///
/// Adapters add only their own language: Python objects and the GIL, or NIXL's status codes.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nixl/nixl.hpp>  // the core and every linked component (NIXL_HAS_<NAME>)

namespace nixl::runtime {

/// Every backend of the build, in the umbrella's order (UCX, POSIX, CUDA, GDS, GDS_MT,
/// LIBFABRIC, OBJ, AZURE_BLOB, as built); a new backend joins through nixl::enabled_backends.
using agent_t = nixl::agent_over<nixl::enabled_backends>;
using prepared_t = typename agent_t::prepared;
using request_t = typename agent_t::xfer_request;

/// NIXL's default_comm_port: the metadata listener's port, and a peer's when a call gives 0.
inline constexpr int default_comm_port = 8888;

/// NIXL's agent configuration (nixlAgentConfig), with NIXL's defaults.
struct config {
  bool prog_thread = false;    ///< useProgThread
  bool listen_thread = false;  ///< useListenThread: run the metadata listener
  int listen_port = default_comm_port;
  thread_sync sync = thread_sync::none;
  bool capture_telemetry = false;
  std::chrono::microseconds progress_delay{0};  ///< pthrDelay
  std::chrono::microseconds etcd_watch_timeout{5000000};
  std::chrono::microseconds xfer_stall_timeout{0};  ///< xferStallTimeout; <= 0: off
  std::string listen_address;                       ///< empty: NIXL_LISTEN_ADDRESS, else 127.0.0.1
  std::string metadata_secret;                      ///< empty: NIXL_METADATA_SECRET, else none
};

/// Where a metadata call goes: a peer's listener when `ip` is set, else the central store.
struct address {
  std::string ip;
  std::uint16_t port = default_comm_port;
  std::string label;
};

/// An address from a caller's values: port 0 means default_comm_port. Throws invalid_param for
/// a port outside 0..65535.
address address_of(std::string ip, int port, std::string label = {});

/// NIXL's memory type number (nixl_mem_t, DRAM_SEG..FILE_SEG) as a core kind; throws
/// invalid_param naming NIXL's values for any other number.
mem_kind kind_of(int nixl_mem_type);

class agent;

/// A backend an agent created: its name and what its type supports. Owned by the agent.
struct backend {
  std::string name;
  bool remote = false;  ///< moves data to and from peers
  bool local = false;   ///< moves data within this agent (loopback)
  bool notif = false;   ///< sends notifications
};

/// A prepared descriptor list handed out by an agent (adapters may derive their handle type).
struct prepared {
  explicit prepared(agent& o) noexcept : owner(&o) {}
  agent* const owner;
  prepared_t list;
};

/// A transfer request handed out by an agent (adapters may derive their handle type).
struct request {
  explicit request(agent& o) noexcept : owner(&o) {}
  agent* const owner;
  request_t req;
};

/// The objects of one kind an agent handed out, by address: kept until released or until the
/// agent goes. Creation and release only, never on post or status; thread-safe.
template <class T>
class handles {
 public:
  /// Keeps `h` and returns it (as the caller's type).
  template <class U>
  U* keep(std::shared_ptr<U> h) {
    U* p = h.get();
    std::lock_guard g(mutex_);
    map_.emplace(static_cast<const void*>(static_cast<const T*>(p)), std::move(h));
    return p;
  }
  /// The object at `h`, kept alive while the caller holds it; null when `h` is not one of ours.
  std::shared_ptr<T> find(const void* h) const {
    std::lock_guard g(mutex_);
    auto it = map_.find(h);
    return it == map_.end() ? nullptr : it->second;
  }
  /// Drops `h` (freed when no caller holds it any longer); false when it is not one of ours.
  bool drop(const void* h) noexcept {
    std::lock_guard g(mutex_);
    return map_.erase(h) != 0;
  }
  void clear() noexcept {
    std::unordered_map<const void*, std::shared_ptr<T>> gone;
    {
      std::lock_guard g(mutex_);
      gone.swap(map_);
    }
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const void*, std::shared_ptr<T>> map_;
};

/// One agent of every backend of the build, its metadata exchange and what it handed out.
class agent {
 public:
  /// Throws std::invalid_argument for an empty name, invalid_param for a port outside
  /// 0..65535, not_supported for a listener in a build without the exchange, and what the
  /// agent or the exchange throw (a listener that cannot bind).
  agent(const std::string& name, const config& c);
  ~agent();
  agent(const agent&) = delete;
  agent& operator=(const agent&) = delete;

  agent_t& core() noexcept { return *agent_; }
  const agent_t& core() const noexcept { return *agent_; }
  const std::string& name() const noexcept;

  // -- backends --
  /// Names of the backend types of the build.
  static std::vector<std::string> available_backends();
  /// Creates backend `name` with string parameters and returns its handle. Throws not_found
  /// for a name that is no backend type of the build, invalid_param for one created already.
  const backend& create_backend(std::string_view name, const params& p);
  /// The handle of created backend `name`; null when it was not created.
  const backend* find_backend(std::string_view name);
  /// True when `b` is one of this agent's backend handles.
  bool owns(const backend* b) const noexcept;
  /// `b` when it is one of this agent's handles; throws invalid_param otherwise.
  const backend& checked(const void* b) const;
  /// The backends of `bs` by name (none: the agent chooses); throws invalid_param for a handle
  /// of another agent.
  backend_options options(std::span<const backend* const> bs) const;

  // -- handles: prepared lists and requests --
  handles<prepared> lists;
  handles<request> requests;
  /// The prepared list at `h`; throws invalid_param when it is unknown or released.
  std::shared_ptr<prepared> list_at(const void* h) const;
  /// The request at `h`; throws invalid_param when it is unknown or released.
  std::shared_ptr<request> request_at(const void* h) const;
  /// Releases request `r` and drops its handle; returns repost_active, keeping the handle,
  /// when the backend could not cancel the transfer in flight.
  status release(request& r);

  // -- metadata exchange --
  /// Calls `f(exchange, target)` for `a`; throws not_supported naming `call` in a build without
  /// the exchange.
  template <class F>
  decltype(auto) with_exchange(std::string_view call, const address& a, F&& f);
  /// The port the metadata listener bound (0: none, or no exchange in this build).
  std::uint16_t listen_port() const noexcept;

 private:
  [[noreturn]] static void no_exchange(std::string_view call);

  std::unique_ptr<agent_t> agent_;
#if defined(NIXL_HAS_METADATA)
  std::unique_ptr<metadata::exchange> exchange_;
#endif
  mutable std::mutex backends_mutex_;  ///< createBackend may run beside data-path calls
  std::vector<std::unique_ptr<backend>> backends_;
};

template <class F>
decltype(auto) agent::with_exchange(std::string_view call, const address& a, F&& f) {
#if defined(NIXL_HAS_METADATA)
  (void)call;
  metadata::target t;
  t.ip = a.ip;
  t.port = a.port;
  t.label = a.label;
  return std::forward<F>(f)(*exchange_, t);
#else
  (void)a, (void)f;
  no_exchange(call);
#endif
}

}  // namespace nixl::runtime
