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
  std::size_t notif_capacity = 256;   ///< bytes reserved for notifications set at post
};

}  // namespace nixl
