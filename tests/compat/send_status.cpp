// The status of sendLocalMD, sendLocalPartialMD and fetchRemoteMD towards a peer's listener is
// the same whatever the timing, as NIXL's: the agent hands the I/O to its listener thread and
// returns NIXL_SUCCESS; a peer's refusal is logged, never returned, whether it came back before
// the call returned or after. The peer is reached through a proxy that holds each connection
// back by a delay (none, then 30 ms), so the refusal comes back before and after the return.
// Exit status 0: passed; 77: skipped (no UCX backend).

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "compat_support.hpp"
#include "nixl.h"

using namespace compat_test;
using namespace std::chrono_literals;

namespace {

/// A TCP proxy on a loopback port to `target`: each connection is forwarded after `delay`.
class delaying_proxy {
 public:
  explicit delaying_proxy(uint16_t target) : target_(target) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), n) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) != 0)
      return;
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~delaying_proxy() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    std::lock_guard g(m_);
    for (auto& t : conns_) t.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::atomic<std::chrono::milliseconds> delay{0ms};

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::lock_guard g(m_);
      conns_.emplace_back([this, c, d = delay.load()] { forward(c, d); });
    }
  }
  void forward(int client, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
    int up = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_);
    if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      pollfd p[2] = {{client, POLLIN, 0}, {up, POLLIN, 0}};
      char buf[65536];
      for (bool open = true; open && !stop_;) {
        if (::poll(p, 2, 50) <= 0) continue;
        for (int i = 0; i < 2 && open; ++i) {
          if (p[i].revents == 0) continue;
          ssize_t n = ::read(p[i].fd, buf, sizeof buf);
          open = n > 0 && ::write(p[1 - i].fd, buf, static_cast<std::size_t>(n)) == n;
        }
      }
    }
    ::close(up);
    ::close(client);
  }

  uint16_t target_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex m_;
  std::vector<std::thread> conns_;
};

}  // namespace

int main() {
  const uint16_t pa = free_port(), pb = free_port(), pc = free_port();
  // a sends; b refuses a's partial metadata (no connection info of a yet); c, with no backend,
  // refuses a's full metadata (no backend in common) and a fetch of another agent's name.
  nixlAgent a("st-a", nixlAgentConfig(true, true, pa)), b("st-b", nixlAgentConfig(true, true, pb)),
      c("st-c", nixlAgentConfig(true, true, pc));
  nixlBackendH *ha = nullptr, *hb = nullptr;
  if (a.createBackend("UCX", {}, ha) != NIXL_SUCCESS) {
    std::printf("SKIPPED: no UCX backend\n");
    return 77;
  }
  expect(b.createBackend("UCX", {}, hb) == NIXL_SUCCESS, "createBackend(b)");
  buffer mem(8192, 1);
  const auto reg = reg_list(DRAM_SEG, {nixlBlobDesc(mem.addr(), mem.size, 0, "")});
  expect(a.registerMem(reg) == NIXL_SUCCESS, "registerMem");

  delaying_proxy to_b(pb), to_c(pc);
  expect(to_b.port() != 0 && to_c.port() != 0, "proxies listen");
  nixl_opt_args_t via_b, via_c;
  via_b.ipAddr = via_c.ipAddr = "127.0.0.1";
  via_b.port = to_b.port();
  via_c.port = to_c.port();

  for (auto d : {0ms, 30ms}) {
    to_b.delay = d;
    to_c.delay = d;
    for (int i = 0; i < 40; ++i) {
      expect(a.sendLocalPartialMD(reg, &via_b) == NIXL_SUCCESS, "sendLocalPartialMD refused", i);
      expect(a.sendLocalMD(&via_c) == NIXL_SUCCESS, "sendLocalMD refused", i);
      expect(a.fetchRemoteMD("st-b", &via_c) == NIXL_SUCCESS, "fetchRemoteMD refused", i);
      if (d == 0ms) std::this_thread::sleep_for(1ms);  // let some refusals come back first
    }
  }
  // None of them was loaded.
  const auto x = xfer_list(DRAM_SEG, {nixlBasicDesc(mem.addr(), mem.size, 0)});
  expect(b.checkRemoteMD("st-a", x) == NIXL_ERR_NOT_FOUND, "b did not load a's partial metadata");
  expect(c.checkRemoteMD("st-a", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_ERR_NOT_FOUND,
         "c did not load a's metadata");
  // The same calls through to a peer that accepts still succeed, and take effect.
  nixl_opt_args_t direct_b;
  direct_b.ipAddr = "127.0.0.1";
  direct_b.port = pb;
  expect(a.sendLocalMD(&direct_b) == NIXL_SUCCESS, "sendLocalMD accepted");
  expect(eventually([&] { return b.checkRemoteMD("st-a", x) == NIXL_SUCCESS; }),
         "b loaded a's metadata");
  if (failures != 0) return 1;
  std::printf("send/fetch statuses: OK\n");
  return 0;
}
