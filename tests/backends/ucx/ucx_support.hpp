#pragma once
// Helpers of the UCX backend tests.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nixl/backends/ucx.hpp>
#include <nixl/status.hpp>

#include "nixl_test/buffer.hpp"
#include "nixl_test/build_info.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/peer_process.hpp"
#include "nixl_test/wait.hpp"

namespace ucx_test {

using nixl::test::sanitized;

/// The largest transfer of the tests: 64 MiB, or 4 MiB under sanitizers (whose instrumented
/// byte loops would otherwise dominate the run).
inline constexpr std::size_t big = sanitized ? std::size_t{4} << 20 : std::size_t{64} << 20;

using nixl::test::buffer;
using nixl::test::code_of;

using nixl::test::bytes_of;
using nixl::test::wait_done;

}  // namespace ucx_test

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>
#include <vector>

namespace ucx_test {

using nixl::test::fnv;

/// The UCX peer helper: NIXL_UCX_PEER_LAUNCHER may run it in another namespace.
class peer_process : public nixl::test::peer_process {
 public:
  peer_process(const std::string& exe, std::vector<std::string> args)
      : nixl::test::peer_process(exe, std::move(args), {"NIXL_UCX_PEER_LAUNCHER"}) {}
};

inline std::string sum_cmd(std::size_t off, std::size_t len) {
  return fmt::format("SUM {} {}", off, len);
}
/// The peer's answer to sum_cmd when its range holds these bytes.
inline std::string sum_of(const void* p, std::size_t n) {
  return fmt::format("SUM {:x}", fnv(p, n));
}

/// The notifications the peer reports after waiting for `n`: (sender, message) pairs.
/// The target's answer to NOTIFS or ABORTS: (tag, sender, message) up to "END".
inline std::vector<std::tuple<std::string, std::string, std::string>> target_lines(
    peer_process& t) {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (;;) {
    std::istringstream in(t.line());
    std::string tag, from, h;
    in >> tag >> from >> h;
    if (tag == "END") return out;
    std::string msg;
    if (h != "-")
      for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        msg += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    out.emplace_back(tag, from, msg);
  }
}

inline std::vector<std::pair<std::string, std::string>> target_notifs(peer_process& t,
                                                                      std::size_t n) {
  t.send(fmt::format("NOTIFS {} 20000", n));
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [tag, from, msg] : target_lines(t)) out.emplace_back(from, msg);
  return out;
}

}  // namespace ucx_test
