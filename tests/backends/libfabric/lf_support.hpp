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

/// Parameters of a provider the tests run over: tcp;ofi_rxm pinned to loopback, or shm.
inline nixl::params tcp_params(std::string interfaces = "lo") {
  return {{"provider", "tcp;ofi_rxm"}, {"interfaces", std::move(interfaces)}};
}
inline nixl::params shm_params() {
  return {{"provider", "shm"}};
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
