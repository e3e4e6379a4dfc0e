#pragma once
// Helpers of the LIBFABRIC backend tests: the providers to run over (buffers, waits and the peer
// helper are the shared ones of tests/support/nixl_test).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include <nixl/backends/libfabric.hpp>
#include <nixl/status.hpp>

#include "nixl_test/buffer.hpp"
#include "nixl_test/build_info.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/peer_process.hpp"
#include "nixl_test/wait.hpp"

namespace lf_test {

using nixl::test::buffer;
using nixl::test::code_of;

using nixl::test::bytes_of;
using nixl::test::fnv;
using nixl::test::wait_done;

/// How long a peer may leave heartbeats unanswered in these tests: the default, except under a
/// sanitizer, where a busy 2-core machine starves an in-process peer's thread for more than the
/// default 1.2 s and a live peer would be declared dead.
inline constexpr std::chrono::milliseconds peer_timeout{nixl::test::sanitized ? 4000 : 1200};

/// Parameters of a provider the tests run over: tcp;ofi_rxm pinned to loopback, or shm.
inline nixl::params tcp_params(std::string interfaces = "lo") {
  return {{"provider", "tcp;ofi_rxm"},
          {"interfaces", std::move(interfaces)},
          {"peer_timeout_ms", std::to_string(peer_timeout.count())}};
}
inline nixl::params shm_params() {
  return {{"provider", "shm"}, {"peer_timeout_ms", std::to_string(peer_timeout.count())}};
}

/// Why a provider cannot be opened here, or empty when it can.
inline std::string unavailable(const nixl::params& p) {
  try {
    nixl::libfabric::backend b(nixl::libfabric::config::from_params(p),
                               nixl::backend_context{"probe", nixl::thread_sync::none, false, {}});
    return {};
  } catch (const nixl::error& e) {
    return e.what();
  }
}

}  // namespace lf_test
