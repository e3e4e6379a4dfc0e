// The target side of the two-process test, a NIXL program: an agent "peer" with UCX and a
// metadata listener sends its metadata to the initiator's listener (port in argv[1]), prints
// "READY <addr> <len> <port>", waits for the initiator's WRITE notification, checks the bytes,
// prints "OK" or "BAD <why>", notifies the initiator back and exits when its input closes.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "compat_support.hpp"
#include "nixl.h"

using namespace compat_test;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <initiator listener port>\n", argv[0]);
    return 2;
  }
  const int initiator_port = std::atoi(argv[1]);
  const uint16_t port = free_port();
  nixlAgent agent("peer", nixlAgentConfig(true, true, port));
  nixlBackendH* ucx = nullptr;
  if (agent.createBackend("UCX", {}, ucx) != NIXL_SUCCESS) {
    std::printf("BAD createBackend\n");
    return 1;
  }
  const std::size_t n = 1 << 20;
  buffer buf(n, 11);
  if (agent.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(buf.addr(), n, 0, "")})) != NIXL_SUCCESS) {
    std::printf("BAD registerMem\n");
    return 1;
  }
  nixl_opt_args_t to;
  to.ipAddr = "127.0.0.1";
  to.port = initiator_port;
  if (agent.sendLocalMD(&to) != NIXL_SUCCESS) {
    std::printf("BAD sendLocalMD\n");
    return 1;
  }
  std::printf("READY %llu %zu %u\n", static_cast<unsigned long long>(buf.addr()), n, port);
  std::fflush(stdout);

  const auto got = wait_notifs(agent, "initiator", 1, 30s);
  if (got.size() != 1 || got[0] != "done")
    std::printf("BAD notification\n");
  else if (!buf.holds(12))
    std::printf("BAD data\n");
  else
    std::printf("OK\n");
  std::fflush(stdout);
  // The initiator sent its metadata to our listener before writing.
  if (!eventually([&] {
        return agent.checkRemoteMD("initiator", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_SUCCESS;
      }) ||
      agent.genNotif("initiator", "bye") != NIXL_SUCCESS) {
    std::printf("BAD genNotif\n");
    std::fflush(stdout);
  }
  char c;
  while (::read(0, &c, 1) > 0) {
  }
  return 0;
}
