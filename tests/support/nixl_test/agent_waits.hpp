#pragma once
// Helpers of the tests that drive a nixl::agent: descriptor lists of equal blocks, and the
// deadline-in-time waits for a request and for notifications.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nixl/detail/memory.hpp>
#include <nixl/status.hpp>

#include "nixl_test/wait.hpp"

namespace nixl::test {

/// `n` DRAM descriptors of `sz` bytes at `base`, in order or reversed.
template <class List>
List block_list(std::uintptr_t base, std::size_t n, std::size_t sz, bool reversed = false) {
  List l;
  for (std::size_t i = 0; i < n; ++i) l.push_back({base + (reversed ? n - 1 - i : i) * sz, sz, 0});
  return l;
}

/// The DRAM descriptor list of the agent tests.
using dram_list = nixl::xfer_list<nixl::dram_t>;

/// `n` DRAM descriptors of `sz` bytes at `base`, in order or reversed.
inline dram_list blocks(std::uintptr_t base, std::size_t n, std::size_t sz, bool reversed = false) {
  return block_list<dram_list>(base, n, sz, reversed);
}

/// The names the agent tests use unqualified: `using namespace nixl::test::agent_names;`.
namespace agent_names {
using nixl::status;
using nixl::xfer_op;
using nixl::test::dram_list;
}  // namespace agent_names

/// Waits until agent `a` has received `count` notifications from `from`; returns those it has.
template <class Agent>
std::vector<std::string> wait_notifs(Agent& a, const std::string& from, std::size_t count,
                                     std::chrono::milliseconds limit = default_limit) {
  nixl::notif_map m;
  wait_done(
      [&] {
        a.notifications(m);
        return m[from].size() < count ? nixl::status::in_progress : nixl::status::success;
      },
      limit);
  return m[from];
}

}  // namespace nixl::test
