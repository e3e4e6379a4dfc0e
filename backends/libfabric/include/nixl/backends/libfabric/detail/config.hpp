#pragma once
/// `nixl::libfabric::config`: the LIBFABRIC backend's settings, parsed from NIXL's parameter
/// names plus a few of this library's own.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/detail/params.hpp>
#include <nixl/memory.hpp>

namespace nixl::libfabric {

/// Backend configuration. `from_params` takes NIXL's parameter names.
struct config {
  /// The most rails (NICs, interfaces) one backend drives.
  static constexpr std::size_t max_rails = 16;

  /// libfabric provider (`provider`): a name as `FI_PROVIDER` takes it ("tcp;ofi_rxm", "shm",
  /// "efa", "verbs;ofi_rxm", "sockets"). Empty: `FI_PROVIDER` from the environment, else
  /// "tcp;ofi_rxm".
  std::string provider;
  /// Rails (`interfaces`, alias `device_list`): comma-separated domain names as `fi_info`
  /// shows them ("lo", "veth0", "rdmap16s27-rdm"). Empty: `NIXL_LIBFABRIC_INTERFACES` (the same
  /// list) when set, else `FI_TCP_IFACE` / `FI_SOCKETS_IFACE` for those providers, else the
  /// first domain the provider reports (one rail).
  std::vector<std::string> interfaces;
  /// Transfers of a descriptor longer than this are striped over every rail (`stripe_threshold`,
  /// bytes; 128 KiB as NIXL's EFA plugin).
  std::size_t stripe_threshold = std::size_t{128} << 10;
  /// The largest notification (`max_notif_size`); receive buffers are this size plus a header.
  std::size_t max_notif_size = std::size_t{64} << 10;
  /// Receives posted on rail 0 for notifications and heartbeats (`rx_buffers`).
  std::size_t rx_buffers = 64;
  /// Heartbeat period to each loaded peer (`heartbeat_ms`) and how long a heartbeat may stay
  /// unanswered before the peer counts as dead (`peer_timeout_ms`).
  std::chrono::milliseconds heartbeat{100};
  std::chrono::milliseconds peer_timeout{1200};
  /// NIXL's names, accepted: application threads (`num_threads`) and descriptors per posting
  /// batch (`split_batch_size`). Requests are already spread over rails; these only bound
  /// posting batches.
  std::size_t num_threads = 0;
  std::size_t split_batch_size = 1024;
  /// Progress thread (`enable_prog_thread`). When unset, the agent's setting decides.
  std::optional<bool> enable_prog_thread;
  /// After work, the progress thread keeps polling this long before it sleeps
  /// (`progress_spin_us`).
  std::chrono::microseconds progress_spin{50};
  /// Who makes a request's libfabric calls while the progress thread runs (`post_thread`: auto,
  /// always, never). `auto` hands the thread every request on the tcp and sockets providers
  /// (their fi_writemsg moves data inside the call: 20-35 us at 4 KiB, 2-3 ms at 64 MiB on
  /// loopback) and requests of `post_thread_ops` operations or more on the others; the first
  /// status check of a handed request makes the post itself when the thread has not.
  nixl::detail::post_thread_mode post_thread = nixl::detail::post_thread_mode::automatic;
  static constexpr std::size_t post_thread_ops = 16;

  /// Parses NIXL-style params; throws `nixl::error(invalid_param)` naming a bad value.
  static config from_params(const params& p);
  /// The params that give this config back.
  params to_params() const;
  /// "a, b,c" -> {"a", "b", "c"}.
  static std::vector<std::string> split_list(std::string_view s);
  /// The provider in effect (the parameter, else FI_PROVIDER, else "tcp;ofi_rxm").
  std::string effective_provider() const;
};

}  // namespace nixl::libfabric
