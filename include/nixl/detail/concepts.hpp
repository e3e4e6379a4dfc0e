#pragma once
/// What a backend is, layered: backend -> remote_backend -> notifying_backend, and
/// backend_for<B, Local, Remote> for the kinds it moves.

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nixl/detail/memory.hpp>
#include <nixl/detail/status.hpp>

namespace nixl {

namespace detail {
class waker;
}

/// Lock discipline of an agent (NIXL's `nixl_thread_sync_t`).
enum class thread_sync : std::uint8_t { none = 0, strict = 1, rw = 2 };

/// What an agent tells each backend it creates.
struct backend_context {
  std::string agent_name;
  thread_sync sync = thread_sync::none;
  bool progress_thread = false;
  std::chrono::microseconds progress_delay{0};
  /// The agent's waker (detail/waker.hpp): a backend that finishes requests or queues
  /// notifications from a thread of its own calls `notify()` on it after each. May be null.
  detail::waker* waker = nullptr;
};

namespace detail {
template <class List>
struct is_kind_list : std::false_type {};
template <class... K>
struct is_kind_list<kind_list<K...>> : std::bool_constant<(kind_tag<K> && ...)> {};
}  // namespace detail

// clang-format 14 cannot lay out a requires-expression joined with && (it glues the operands
// and splits `noexcept` from its braces); the contracts below are formatted by hand.
// clang-format off

/// The core contract: a name, a config parsed from string params, the kinds it moves,
/// register/deregister, and prepare/post/check/release of a transfer.
template <class B>
concept backend =
    requires {
      { B::name } -> std::convertible_to<std::string_view>;
      typename B::memory_kinds;
      typename B::config;
      typename B::region;
      typename B::remote_region;
      typename B::peer;
      typename B::request;
    } &&
    detail::is_kind_list<typename B::memory_kinds>::value &&
    std::is_default_constructible_v<typename B::request> &&
    std::is_nothrow_move_constructible_v<typename B::request> &&
    std::constructible_from<B, const typename B::config&, const backend_context&> &&
    requires(B& b, const B& cb, const params& p, mem_kind k, const reg_desc& rd,
             typename B::region& reg, typename B::request& req, xfer_op op,
             std::span<const bound_desc<typename B::region>> local,
             std::span<const bound_desc<typename B::remote_region>> remote,
             typename B::peer& peer, notif_arg n) {
      { B::config::from_params(p) } -> std::same_as<typename B::config>;
      { B::default_params() } -> std::convertible_to<params>;
      { b.register_region(k, rd) } -> std::same_as<typename B::region>;
      { b.deregister_region(reg) } noexcept;
      b.prepare(req, op, local, remote, peer);
      { b.post(req, n) } noexcept -> std::same_as<status>;
      { b.check(req) } noexcept -> std::same_as<status>;
      { b.release(req) } noexcept -> std::same_as<status>;
    };

/// A backend that can move data between an agent and itself.
template <class B>
concept loopback_backend =
    backend<B> &&
    requires(B& b, const typename B::region& reg, typename B::remote_region& rr) {
      { b.self_peer() } -> std::same_as<typename B::peer>;
      { b.load_local(reg) } -> std::same_as<typename B::remote_region>;
      { b.unload_region(rr) } noexcept;
    };

/// A backend that reaches other agents: connection info, public region data, peers.
template <class B>
concept remote_backend =
    backend<B> &&
    requires(B& b, const B& cb, const typename B::region& reg, typename B::peer& peer,
             typename B::remote_region& rr, std::string_view name, mem_kind k, const desc& d,
             std::span<const std::byte> bytes) {
      { cb.connection_info() } -> std::convertible_to<std::string>;
      { b.load_peer(name, bytes) } -> std::same_as<typename B::peer>;
      { b.unload_peer(peer) } noexcept;
      { cb.public_data(reg) } -> std::convertible_to<std::string>;
      { b.unpack(peer, k, d, bytes) } -> std::same_as<typename B::remote_region>;
      { b.unload_region(rr) } noexcept;
    };

// clang-format on

/// A backend that delivers notifications.
template <class B>
concept notifying_backend = backend<B> &&
    requires(B& b, typename B::peer& peer, std::string_view msg, notif_map& out) {
  b.notify(peer, msg);
  b.take_notifications(out);
};

/// A notifying backend that sends abort notices: when a request that carried a notification
/// ends without success (an error, a release or stall timeout while in flight), the target is
/// told so, with the notification's message, and collects such notices apart from
/// notifications (docs/error-model.md, "Abort notices").
template <class B>
concept aborting_backend = notifying_backend<B> && requires(B& b, notif_map& out) {
  b.take_aborts(out);
};

/// A backend that tells which agents it found gone (docs/error-model.md, "Agents found gone"):
/// loaded peers, and agents that only sent to this one.
template <class B>
concept watching_backend = backend<B> &&
    requires(B& b, const B& cb, std::vector<std::string>& out) {
  b.gone_agents(out);
  { cb.gone_events() }
  noexcept->std::same_as<std::uint64_t>;
};

/// A backend told when its agent is being destroyed, before the agent unloads its peers (so
/// that it tells an ending from an invalidation).
template <class B>
concept closing_aware_backend = backend<B> && requires(B& b) {
  { b.agent_closing() }
  noexcept;
};

/// A remote backend that tells which incarnation of an agent (e.g. which process) connection
/// info comes from, so that new connection info under a loaded name reads as a restart.
template <class B>
concept incarnation_backend = remote_backend<B> && requires(std::span<const std::byte> info) {
  { B::incarnation(info) }
  noexcept->std::same_as<std::uint64_t>;
};

/// Optional capabilities, detected when present.
template <class B>
concept progressing_backend = backend<B> && requires(B& b) {
  b.progress();
};
/// A backend that tells whether it signals the agent's waker for every event that can end its
/// requests (a progress thread's completions, a peer found dead): when true, request::wait
/// sleeps on the agent's fd; otherwise it re-checks the request at intervals.
template <class B>
concept waking_backend = backend<B> && requires(const B& cb) {
  { cb.wakes_waiters() }
  noexcept->std::same_as<bool>;
};
/// A backend that can read where a request stands without making progress (what request::wait
/// evaluates after each wake-up, so that waiting does not take the transport's worker away from
/// its progress thread).
template <class B>
concept peeking_backend = backend<B> && requires(const B& cb, const typename B::request& r) {
  { cb.peek(r) }
  noexcept->std::same_as<status>;
};
/// A backend whose progress thread leaves a worker alone while an application thread drives it:
/// `hand_back(r)` says the calling thread stops progressing what `r` waits on (request::wait,
/// after its spin), so the thread takes it back at once.
template <class B>
concept handing_backend = backend<B> && requires(B& b, const typename B::request& r) {
  { b.hand_back(r) }
  noexcept;
};
template <class B>
concept querying_backend = backend<B> && requires(B& b, std::span<const reg_desc> d) {
  { b.query_memory(d) } -> std::convertible_to<std::vector<std::optional<params>>>;
};
template <class B>
concept estimating_backend = backend<B> && requires(const B& b, const typename B::request& r) {
  { b.estimate(r) } -> std::convertible_to<std::optional<std::chrono::microseconds>>;
};
template <class B>
concept connecting_backend = backend<B> && requires(B& b, typename B::peer& p) {
  b.connect(p);
};

/// True when backend `B` can move between run-time kinds `local` and `remote`.
template <backend B>
constexpr bool moves(mem_kind local, mem_kind remote) noexcept {
  if (!contains(typename B::memory_kinds{}, local) || !contains(typename B::memory_kinds{}, remote))
    return false;
  if constexpr (requires { B::can_move(local, remote); })
    return B::can_move(local, remote);
  else
    return true;
}

/// True when backend `B` asks to be tried before the others for this pair of kinds, with its
/// optional `static constexpr bool prefers(mem_kind local, mem_kind remote)`. The agent tries
/// preferring backends first, then the rest, each group in the agent's type order; a backend
/// that refuses a request with `not_supported` (a peer it cannot reach) passes it on.
template <backend B>
constexpr bool prefers(mem_kind local, mem_kind remote) noexcept {
  if constexpr (requires { B::prefers(local, remote); })
    return moves<B>(local, remote) && B::prefers(local, remote);
  else
    return false;
}

/// `B` moves data between local kind `Local` and remote kind `Remote`.
template <class B, class Local, class Remote>
concept backend_for = backend<B> && kind_tag<Local> && kind_tag<Remote> &&
    kind_in<Local, typename B::memory_kinds> && kind_in<Remote, typename B::memory_kinds> &&
    (moves<B>(Local::value, Remote::value));

}  // namespace nixl
