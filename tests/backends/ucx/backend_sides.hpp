#pragma once
// Helpers of the tests that drive nixl::ucx::backend directly: a backend with one registered
// buffer, a loaded peer with its remote region, bound descriptors.

#include <nixl/backends/ucx.hpp>

#include <chrono>
#include <string>

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
struct peer_link {
  nixl::ucx::backend& be;
  nixl::ucx::backend::peer peer;
  nixl::ucx::backend::remote_region rr;
  peer_link(side& from, side& to, std::string to_name)
      : be(from.be), peer(from.be.load_peer(to_name, bytes_of(to.be.connection_info()))) {
    rr = from.be.unpack(peer, nixl::mem_kind::dram, {to.buf.addr(), to.buf.size(), 0},
                        bytes_of(to.be.public_data(to.reg)));
  }
  ~peer_link() {
    be.unload_region(rr);
    be.unload_peer(peer);
  }
};

template <class R>
nixl::bound_desc<R> bd(std::uintptr_t a, std::size_t n, const R& r) {
  nixl::bound_desc<R> d;
  d.addr = a;
  d.len = n;
  d.dev = 0;
  d.region = &r;
  return d;
}

}  // namespace ucx_test
