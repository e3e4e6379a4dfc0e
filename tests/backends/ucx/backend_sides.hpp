#pragma once
// Helpers of the tests that drive nixl::ucx::backend directly: a backend with one registered
// buffer, a loaded peer with its remote region, bound descriptors.

#include <nixl/backends/ucx.hpp>

#include <chrono>
#include <string>

#include "nixl_test/backend_link.hpp"
#include "ucx_support.hpp"

namespace ucx_test {

/// How a test backend runs: progress thread, locking mode, longest idle sleep of the thread.
struct run_mode {
  bool thread = true;
  nixl::thread_sync sync = nixl::thread_sync::none;
  std::chrono::microseconds delay{0};
};

inline nixl::backend_context ctx(std::string name, run_mode m = {}) {
  return nixl::backend_context{std::move(name), m.sync, m.thread, m.delay};
}

inline nixl::backend_context ctx(std::string name, bool thread) {
  return ctx(std::move(name), run_mode{thread});
}

/// One side of a test: a backend with one registered buffer.
struct side {
  nixl::ucx::backend be;
  buffer buf;
  nixl::ucx::backend::region reg;
  side(std::string name, std::size_t n, nixl::params p = {}, run_mode m = {})
      : be(nixl::ucx::backend::config::from_params(p), ctx(std::move(name), m)), buf(n) {
    reg = be.register_region(nixl::mem_kind::dram, {{buf.addr(), n, 0}, ""});
  }
  side(std::string name, std::size_t n, nixl::params p, bool thread)
      : side(std::move(name), n, std::move(p), run_mode{thread}) {}
  ~side() { be.deregister_region(reg); }
};

/// A loaded peer with one remote region.
struct peer_link : nixl::test::peer_link<nixl::ucx::backend> {
  peer_link(side& from, side& to, const std::string& to_name)
      : nixl::test::peer_link<nixl::ucx::backend>(from, to, to_name) {}
};

using nixl::test::bd;
using reversed_blocks = nixl::test::reversed_blocks<nixl::ucx::backend>;

/// The names the tests that drive the backend use unqualified:
/// `using namespace ucx_test::backend_names;`.
namespace backend_names {
using nixl::mem_kind;
using nixl::status;
using nixl::xfer_op;
using ucx_test::bd;
using ucx_test::buffer;
using ucx_test::bytes_of;
using ucx_test::code_of;
using ucx_test::peer_link;
using ucx_test::reversed_blocks;
using ucx_test::side;
using backend = nixl::ucx::backend;
}  // namespace backend_names

}  // namespace ucx_test
