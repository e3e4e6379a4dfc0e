// A NIXL program as written for NIXL 1.4: two agents, UCX, metadata exchange, a WRITE with a
// notification. Built unchanged against nixl-cpp (find_package(nixl COMPONENTS compat)).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "nixl.h"

int main() {
  nixlAgentConfig cfg(true);
  nixlAgent initiator("initiator", cfg), target("target", cfg);
  nixlBackendH *ib = nullptr, *tb = nullptr;
  nixl_b_params_t params;
  nixl_mem_list_t mems;
  if (initiator.getPluginParams("UCX", mems, params) != NIXL_SUCCESS ||
      initiator.createBackend("UCX", params, ib) != NIXL_SUCCESS ||
      target.createBackend("UCX", params, tb) != NIXL_SUCCESS) {
    std::cout << "no UCX backend\n";
    return 0;
  }
  std::vector<char> src(4096, 'x'), dst(4096, 0);
  nixl_reg_dlist_t rs(DRAM_SEG), rd(DRAM_SEG);
  rs.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(src.data()), src.size(), 0, ""));
  rd.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(dst.data()), dst.size(), 0, ""));
  initiator.registerMem(rs);
  target.registerMem(rd);

  nixl_blob_t md;
  std::string name;
  target.getLocalMD(md);
  if (initiator.loadRemoteMD(md, name) != NIXL_SUCCESS) return 1;

  nixl_xfer_dlist_t ls = rs.trim(), ld = rd.trim();
  nixl_opt_args_t extra;
  extra.notif = "done";
  nixlXferReqH* req = nullptr;
  if (initiator.createXferReq(NIXL_WRITE, ls, ld, name, req, &extra) != NIXL_SUCCESS) return 1;
  // Deadlines in time, not counts of polls: on a busy machine a poll may take much longer.
  using steady = std::chrono::steady_clock;
  nixl_status_t s = initiator.postXferReq(req);
  for (const auto end = steady::now() + std::chrono::seconds(30);
       s == NIXL_IN_PROG && steady::now() < end;)
    s = initiator.getXferStatus(req);
  if (s != NIXL_SUCCESS) {
    std::cout << "NIXL program: FAILED (transfer status " << static_cast<int>(s) << ")\n";
    return 1;
  }
  nixl_notifs_t notifs;
  for (const auto end = steady::now() + std::chrono::seconds(30);
       notifs["initiator"].empty() && steady::now() < end;) {
    target.getNotifs(notifs);
    std::this_thread::yield();
  }
  initiator.releaseXferReq(req);
  initiator.deregisterMem(rs);
  target.deregisterMem(rd);
  const bool ok = std::memcmp(src.data(), dst.data(), src.size()) == 0 &&
                  notifs["initiator"].size() == 1 && notifs["initiator"][0] == "done";
  std::cout << (ok ? "NIXL program: OK\n" : "NIXL program: FAILED\n");
  return ok ? 0 : 1;
}
