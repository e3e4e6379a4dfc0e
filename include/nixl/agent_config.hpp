#pragma once
/// Options of an agent and of its calls: `agent_config` (NIXL's `nixlAgentConfig`, less the
/// listener and etcd settings, which belong to `nixl::metadata::config`), `backend_options`,
/// `xfer_options`.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nixl/concepts.hpp>

namespace nixl {

/// Agent configuration (NIXL's `nixlAgentConfig`).
struct agent_config {
  /// Passed to backends: run a progress thread (UCX). On by default, as in NIXL's Python API.
  bool enable_prog_thread = true;
  /// Lock discipline; `none` becomes `strict` when a metadata exchange with threads attaches.
  thread_sync sync = thread_sync::none;
  /// Per-request telemetry, unless `NIXL_TELEMETRY_ENABLE` says otherwise.
  bool capture_telemetry = false;
  /// Progress thread wake-up period hint for backends.
  std::chrono::microseconds progress_delay{0};
  /// NIXL's xferStallTimeout: a request still in progress this long after its post is canceled
  /// and ends with `xfer_stalled` (see request::status). <= 0: off (the default).
  std::chrono::microseconds xfer_stall_timeout{0};
  /// request::wait on a backend whose progress thread wakes waiters (UCX, LIBFABRIC): the first
  /// wait after a post polls the request for up to this long before it sleeps on the agent's
  /// event fd, so a transfer that ends within microseconds is not delayed by two thread
  /// wake-ups (docs/waiting.md). 0: sleep at once.
  std::chrono::microseconds wait_spin{200};
};

/// Options of registration and metadata calls: restrict to some backends by name.
struct backend_options {
  std::vector<std::string> backends;
};

/// Options of request creation (NIXL's `nixl_opt_args_t` subset that applies).
struct xfer_options {
  std::vector<std::string> backends;  ///< candidate backends, in order of preference
  std::optional<std::string> notif;   ///< notification sent after the data (empty is valid)
  bool skip_merge = false;            ///< keep contiguous descriptors apart
  std::string custom;                 ///< backend-specific parameter
  /// Bytes reserved at creation for a notification given later to `post(n)`, so that such a
  /// post does not allocate (messages of up to 15 bytes never do). 0: nothing reserved, and a
  /// request without a notification costs no allocation for one.
  std::size_t notif_capacity = 0;
  /// This request's stall timeout: > 0 overrides the agent's `xfer_stall_timeout`, 0 takes it,
  /// < 0 turns the check off for this request.
  std::chrono::microseconds stall_timeout{0};
};

}  // namespace nixl
