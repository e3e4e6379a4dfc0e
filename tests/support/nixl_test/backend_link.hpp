#pragma once
// Helpers of the tests that drive a backend directly (without an agent): a loaded peer with one
// remote region, and bound descriptors.

#include <cstddef>
#include <cstdint>
#include <string>

#include <nixl/detail/memory.hpp>

#include "nixl_test/peer_process.hpp"

namespace nixl::test {

/// Side `from` loaded with peer `to` and the remote region of its one registered buffer. A side
/// is anything with a backend `be`, a buffer `buf` and its region `reg`.
template <class Backend>
struct peer_link {
  Backend& be;
  typename Backend::peer peer;
  typename Backend::remote_region rr;
  template <class Side>
  peer_link(Side& from, Side& to, const std::string& to_name)
      : be(from.be), peer(from.be.load_peer(to_name, bytes_of(to.be.connection_info()))) {
    rr = from.be.unpack(peer, nixl::mem_kind::dram, {to.buf.addr(), to.buf.size(), 0},
                        bytes_of(to.be.public_data(to.reg)));
  }
  ~peer_link() {
    be.unload_region(rr);
    be.unload_peer(peer);
  }
  peer_link(const peer_link&) = delete;
  peer_link& operator=(const peer_link&) = delete;
};

/// A descriptor of `n` bytes at `a` (device 0) bound to region `r`.
template <class R>
nixl::bound_desc<R> bd(std::uintptr_t a, std::size_t n, const R& r) {
  nixl::bound_desc<R> d;
  d.addr = a;
  d.len = n;
  d.dev = 0;
  d.region = &r;
  return d;
}

}  // namespace nixl::test
