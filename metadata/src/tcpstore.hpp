#pragma once
// The TCPStore central store of an exchange (private header): NIXL's keys, a worker thread that
// runs the requests, and fetches re-probed until their deadline. The client is tcpstore.hpp.

#include <future>
#include <memory>
#include <string>
#include <string_view>

#include "common.hpp"

namespace nixl::metadata::detail {

class tcpstore_store {
 public:
  /// Checks ctx.cfg.tcpstore_endpoint and starts the worker; connects lazily on it. `ctx` must
  /// outlive it.
  explicit tcpstore_store(const context& ctx);
  /// Stops the worker (waiting fetches fail with status::canceled). Deletes nothing, as NIXL.
  ~tcpstore_store();
  tcpstore_store(const tcpstore_store&) = delete;
  tcpstore_store& operator=(const tcpstore_store&) = delete;

  std::future<void> publish(std::string_view label, std::string blob);
  std::future<void> fetch(std::string_view agent, std::string_view label);
  std::future<void> unpublish();
  std::string key(std::string_view agent, std::string_view label) const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace nixl::metadata::detail

namespace nixl::metadata::detail {

/// Fills c's TCPStore settings from NIXL_TCPSTORE_ENDPOINT / NIXL_TCPSTORE_TIMEOUT_MS /
/// NIXL_TCPSTORE_OP_TIMEOUT_MS (endpoint only when empty). Throws nixl::error(invalid_param)
/// for a timeout that is not a positive number of milliseconds.
void tcpstore_env(config& c);
/// Throws when both etcd and TCPStore are configured or the endpoint is malformed.
void tcpstore_check(const config& c);

}  // namespace nixl::metadata::detail
