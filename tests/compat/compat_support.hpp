#pragma once
// Helpers of the tests of NIXL's C++ API: buffers, bounded waits, a free loopback port. Written
// against nixl.h only, as a NIXL program would be.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nixl.h"

namespace compat_test {

using namespace std::chrono_literals;

/// Failed expectations so far: a test exits 1 when it is not 0.
inline int failures = 0;

/// Counts and prints `what` (and the round, when one is given) when `ok` is false.
inline void expect(bool ok, const char* what, int round = -1) {
  if (ok) return;
  if (round >= 0)
    std::fprintf(stderr, "FAILED: %s (round %d)\n", what, round);
  else
    std::fprintf(stderr, "FAILED: %s\n", what);
  ++failures;
}

/// A page-aligned buffer holding pattern `seed`.
struct buffer {
  explicit buffer(std::size_t n, unsigned seed = 0) : bytes(n + 4096) {
    auto a = reinterpret_cast<std::uintptr_t>(bytes.data());
    p = reinterpret_cast<unsigned char*>((a + 4095) & ~std::uintptr_t{4095});
    size = n;
    fill(seed);
  }
  void fill(unsigned seed) {
    for (std::size_t i = 0; i < size; ++i) p[i] = static_cast<unsigned char>((i * 7 + seed) & 0xff);
  }
  bool holds(unsigned seed, std::size_t off = 0, std::size_t len = SIZE_MAX) const {
    if (len == SIZE_MAX) len = size - off;
    for (std::size_t i = off; i < off + len; ++i)
      if (p[i] != static_cast<unsigned char>((i * 7 + seed) & 0xff)) return false;
    return true;
  }
  std::uintptr_t addr() const { return reinterpret_cast<std::uintptr_t>(p); }
  std::vector<unsigned char> bytes;
  unsigned char* p = nullptr;
  std::size_t size = 0;
};

/// Calls `f` until it returns true or `limit` passed.
template <class F>
bool eventually(F&& f, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

/// Polls a posted request until it leaves NIXL_IN_PROG (bounded).
inline nixl_status_t wait_xfer(nixlAgent& a, nixlXferReqH* r, nixl_status_t s,
                               std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (s == NIXL_IN_PROG && std::chrono::steady_clock::now() < end) s = a.getXferStatus(r);
  return s;
}

/// Waits for `n` notifications from `from` and returns what arrived from it.
inline std::vector<std::string> wait_notifs(nixlAgent& a, const std::string& from, std::size_t n,
                                            std::chrono::milliseconds limit = 10s) {
  nixl_notifs_t m;
  eventually(
      [&] {
        if (a.getNotifs(m) != NIXL_SUCCESS) return false;
        return m[from].size() >= n;
      },
      limit);
  return m[from];
}

/// A loopback TCP port that was free a moment ago.
inline uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t l = sizeof(a);
  uint16_t port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &l) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

inline nixl_reg_dlist_t reg_list(nixl_mem_t t, std::initializer_list<nixlBlobDesc> d) {
  nixl_reg_dlist_t l(t);
  for (const auto& x : d) l.addDesc(x);
  return l;
}
inline nixl_xfer_dlist_t xfer_list(nixl_mem_t t, std::initializer_list<nixlBasicDesc> d) {
  nixl_xfer_dlist_t l(t);
  for (const auto& x : d) l.addDesc(x);
  return l;
}

/// An agent with UCX, a progress thread and (optionally) telemetry.
inline nixlAgentConfig ucx_config(bool telemetry = false) {
  nixlAgentConfig cfg(true);
  cfg.captureTelemetry = telemetry;
  return cfg;
}

/// Loads each agent's full metadata into the other.
inline void exchange_md(nixlAgent& a, nixlAgent& b, std::string& a_name, std::string& b_name) {
  nixl_blob_t ma, mb;
  if (a.getLocalMD(ma) != NIXL_SUCCESS || b.getLocalMD(mb) != NIXL_SUCCESS) return;
  b.loadRemoteMD(ma, a_name);
  a.loadRemoteMD(mb, b_name);
}

}  // namespace compat_test
