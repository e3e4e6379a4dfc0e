#pragma once
// Shared helpers for agent tests over the in-process test backends.
#include <nixl/agent.hpp>

#include <numeric>
#include <vector>

#include "nixl_test/memcpy_backend.hpp"
#include "nixl_test/wait.hpp"  // wait(r): a deadline in time

namespace nixl::test {

using test_agent = nixl::agent<memcpy_backend, file_backend>;

/// A buffer with its registration and transfer descriptors.
struct buffer {
  std::vector<unsigned char> bytes;
  explicit buffer(std::size_t n, unsigned char fill = 0) : bytes(n, fill) {}
  std::uintptr_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(bytes.data()) + off;
  }
  nixl::reg_list<nixl::dram_t> reg() const { return {{{addr(), bytes.size(), 0}, ""}}; }
  nixl::xfer_list<nixl::dram_t> whole() const { return {{addr(), bytes.size(), 0}}; }
  /// `n` blocks of `block` bytes, starting at offset 0.
  nixl::xfer_list<nixl::dram_t> blocks(std::size_t n, std::size_t block) const {
    nixl::xfer_list<nixl::dram_t> l;
    for (std::size_t i = 0; i < n; ++i) l.push_back({addr(i * block), block, 0});
    return l;
  }
  void iota(unsigned char start = 0) { std::iota(bytes.begin(), bytes.end(), start); }
};

/// Registers `src` with `a` and `dst` with `b`, and loads `b`'s metadata into `a`: the usual
/// start of a transfer test.
template <class Agent>
void connect_pair(Agent& a, Agent& b, const buffer& src, const buffer& dst) {
  a.register_memory(src.reg());
  b.register_memory(dst.reg());
  a.load_remote_metadata(b.local_metadata());
}

/// Two agents that know each other, each with a MEMCPY backend.
template <class Agent = test_agent>
struct pair_fixture {
  Agent a{"initiator"};
  Agent b{"target"};
  explicit pair_fixture(const nixl::params& p = {}) {
    a.template create_backend<memcpy_backend>(p);
    b.template create_backend<memcpy_backend>(p);
  }
  /// connect_pair(a, b, src, dst).
  void connect(const buffer& src, const buffer& dst) { connect_pair(a, b, src, dst); }
  void exchange() {
    a.load_remote_metadata(b.local_metadata());
    b.load_remote_metadata(a.local_metadata());
  }
};

}  // namespace nixl::test
