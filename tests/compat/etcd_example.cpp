// NIXL's central-store metadata flow, as NIXL's etcd example runs it, through nixlAgent with
// NIXL_ETCD_ENDPOINTS set (etcd_run.sh starts a throw-away etcd): sendLocalMD, fetchRemoteMD
// with checkRemoteMD polling, sendLocalPartialMD under a label, a READ, and invalidateLocalMD
// seen by the fetching agent. Exit status 0: passed; 77: skipped.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "compat_support.hpp"
#include "nixl.h"

using namespace compat_test;

#define EXPECT(c)                                                          \
  do {                                                                     \
    if (!(c)) {                                                            \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #c); \
      return 1;                                                            \
    }                                                                      \
  } while (0)

int main() {
  if (std::getenv("NIXL_ETCD_ENDPOINTS") == nullptr) {
    std::printf("SKIPPED: NIXL_ETCD_ENDPOINTS is not set\n");
    return 77;
  }
  nixlAgent a("etcd-a", nixlAgentConfig(true)), b("etcd-b", nixlAgentConfig(true));
  nixlBackendH *ha = nullptr, *hb = nullptr;
  if (a.createBackend("UCX", {}, ha) != NIXL_SUCCESS) {
    std::printf("SKIPPED: no UCX backend\n");
    return 77;
  }
  EXPECT(b.createBackend("UCX", {}, hb) == NIXL_SUCCESS);
  buffer one(8192, 1), two(8192, 2), mine(8192, 0);
  auto r1 = reg_list(DRAM_SEG, {nixlBlobDesc(one.addr(), one.size, 0, "")});
  auto r2 = reg_list(DRAM_SEG, {nixlBlobDesc(two.addr(), two.size, 0, "")});
  EXPECT(b.registerMem(r1) == NIXL_SUCCESS);
  EXPECT(a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(mine.addr(), mine.size, 0, "")})) ==
         NIXL_SUCCESS);
  const auto x1 = xfer_list(DRAM_SEG, {nixlBasicDesc(one.addr(), one.size, 0)});
  const auto x2 = xfer_list(DRAM_SEG, {nixlBasicDesc(two.addr(), two.size, 0)});
  const auto lx = xfer_list(DRAM_SEG, {nixlBasicDesc(mine.addr(), mine.size, 0)});

  // Full metadata under "metadata".
  EXPECT(b.sendLocalMD() == NIXL_SUCCESS);
  EXPECT(a.fetchRemoteMD("etcd-b") == NIXL_SUCCESS);
  EXPECT(eventually([&] { return a.checkRemoteMD("etcd-b", x1) == NIXL_SUCCESS; }));

  // Partial metadata needs a label in the central store.
  EXPECT(b.registerMem(r2) == NIXL_SUCCESS);
  EXPECT(b.sendLocalPartialMD(r2) == NIXL_ERR_INVALID_PARAM);
  nixl_opt_args_t label;
  label.metadataLabel = "part-2";
  EXPECT(b.sendLocalPartialMD(r2, &label) == NIXL_SUCCESS);
  EXPECT(a.fetchRemoteMD("etcd-b", &label) == NIXL_SUCCESS);
  EXPECT(eventually([&] { return a.checkRemoteMD("etcd-b", x2) == NIXL_SUCCESS; }));

  nixlXferReqH* req = nullptr;
  EXPECT(a.createXferReq(NIXL_READ, lx, x2, "etcd-b", req) == NIXL_SUCCESS);
  EXPECT(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  EXPECT(mine.holds(2));
  EXPECT(a.releaseXferReq(req) == NIXL_SUCCESS);

  // b removes its keys; a, watching them since its fetch, drops b.
  EXPECT(b.invalidateLocalMD() == NIXL_SUCCESS);
  EXPECT(eventually(
      [&] { return a.checkRemoteMD("etcd-b", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_ERR_NOT_FOUND; },
      15s));
  std::printf("etcd metadata flow: OK\n");
  return 0;
}
