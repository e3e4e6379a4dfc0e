#pragma once
// Helpers of the tests that drive a backend directly (without an agent): a loaded peer with one
// remote region, and bound descriptors.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

/// The tests' scattered request: `n` blocks of `sz` bytes in a row in `from`'s buffer, and in
/// reverse order in the peer's (`link.rr`), `sz + gap` bytes apart: block i here is block
/// n - 1 - i there.
template <class Backend>
struct reversed_blocks {
  std::size_t n, sz, step;
  std::vector<nixl::bound_desc<typename Backend::region>> lo;
  std::vector<nixl::bound_desc<typename Backend::remote_region>> re;
  template <class Side>
  reversed_blocks(const Side& from, std::uintptr_t to_addr, const peer_link<Backend>& link,
                  std::size_t count, std::size_t size, std::size_t gap = 0)
      : n(count), sz(size), step(size + gap) {
    for (std::size_t i = 0; i < n; ++i) {
      lo.push_back(bd(from.buf.addr() + i * sz, sz, from.reg));
      re.push_back(bd(to_addr + (n - 1 - i) * step, sz, link.rr));
    }
  }
  /// After a WRITE: the peer's buffer holds the blocks of this side's pattern `seed`.
  template <class Buffer>
  bool written(const Buffer& to, unsigned seed) const noexcept {
    for (std::size_t i = 0; i < n; ++i)
      if (!to.holds(seed, (n - 1 - i) * step, sz, i * sz)) return false;
    return true;
  }
  /// After a READ: this side's buffer holds the blocks of the peer's pattern `seed`.
  template <class Buffer>
  bool read(const Buffer& from, unsigned seed) const noexcept {
    for (std::size_t i = 0; i < n; ++i)
      if (!from.holds(seed, i * sz, sz, (n - 1 - i) * step)) return false;
    return true;
  }
};

}  // namespace nixl::test
