// Two processes, each a NIXL program: the metadata goes through the listeners, the data through
// UCX, notifications both ways (the other side is nixl_compat_peer, peer_main.cpp).

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include "compat_support.hpp"
#include "nixl.h"
#include "nixl_test/catch.hpp"
#include "nixl_test/wait.hpp"

using namespace compat_test;

namespace {

/// The peer process, its input and output.
class peer {
 public:
  explicit peer(uint16_t initiator_port) {
    int in[2], out[2];
    ::signal(SIGPIPE, SIG_IGN);
    REQUIRE(::pipe(in) == 0);
    REQUIRE(::pipe(out) == 0);
    const std::string port = std::to_string(initiator_port);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      ::execl(NIXL_COMPAT_PEER_EXE, NIXL_COMPAT_PEER_EXE, port.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~peer() {
    if (to_ >= 0) ::close(to_);
    int st = 0;
    // The peer exits once its input closes: wait up to 10 s (in time), then kill it.
    const bool exited =
        nixl::test::wait_until([&] { return ::waitpid(pid_, &st, WNOHANG) != 0; }, 10s);
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
    }
    ::close(from_);
  }
  /// One line of output, or "" after 30 s or at the end of the output.
  std::string line() {
    std::string s;
    for (;;) {
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, 30000) <= 0) return s;
      char c;
      if (::read(from_, &c, 1) <= 0 || c == '\n') return s;
      s += c;
    }
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

}  // namespace

TEST_CASE("compat: two processes, metadata through the listeners", "[compat][ucx][process]") {
  {
    nixlAgent probe("probe", nixlAgentConfig());
    std::vector<nixl_backend_t> plugins;
    probe.getAvailPlugins(plugins);
    if (std::find(plugins.begin(), plugins.end(), "UCX") == plugins.end())
      NIXL_SKIP("this build has no UCX backend");
  }
  const uint16_t port = free_port();
  REQUIRE(port != 0);
  nixlAgent a("initiator", nixlAgentConfig(true, true, port));
  nixlBackendH* ucx = nullptr;
  REQUIRE(a.createBackend("UCX", {}, ucx) == NIXL_SUCCESS);
  const std::size_t n = 1 << 20;
  buffer local(n, 0);
  REQUIRE(a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(local.addr(), n, 0, "")})) ==
          NIXL_SUCCESS);

  peer p(port);
  std::istringstream ready(p.line());
  std::string tag;
  unsigned long long addr = 0;
  std::size_t len = 0;
  unsigned peer_port = 0;
  ready >> tag >> addr >> len >> peer_port;
  REQUIRE(tag == "READY");
  REQUIRE(len == n);
  const auto remote = xfer_list(DRAM_SEG, {nixlBasicDesc(addr, n, 0)});
  REQUIRE(eventually([&] { return a.checkRemoteMD("peer", remote) == NIXL_SUCCESS; }, 20s));
  nixl_opt_args_t to;
  to.ipAddr = "127.0.0.1";
  to.port = static_cast<int>(peer_port);
  REQUIRE(a.sendLocalMD(&to) == NIXL_SUCCESS);

  const auto lx = xfer_list(DRAM_SEG, {nixlBasicDesc(local.addr(), n, 0)});
  nixlXferReqH* req = nullptr;
  REQUIRE(a.createXferReq(NIXL_READ, lx, remote, "peer", req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(local.holds(11));
  REQUIRE(a.releaseXferReq(req) == NIXL_SUCCESS);

  local.fill(12);
  nixl_opt_args_t args;
  args.notif = "done";
  REQUIRE(a.createXferReq(NIXL_WRITE, lx, remote, "peer", req, &args) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  REQUIRE(a.releaseXferReq(req) == NIXL_SUCCESS);
  CHECK(p.line() == "OK");
  const auto back = wait_notifs(a, "peer", 1, 20s);
  REQUIRE(back.size() == 1);
  CHECK(back[0] == "bye");
  CHECK(a.invalidateRemoteMD("peer") == NIXL_SUCCESS);
}
