// Out-parameters after a failed call, as NIXL sets them (its test/nixl/agent_example.cpp checks
// "Dst side is not null" after a failed prepXferDlist): every handle out-parameter of nixlAgent
// is nullptr when the call fails, whatever it held before. Written as a NIXL 1.4 program: only
// <nixl.h>. Exit status 0: passed; 77: skipped (no UCX backend).

#include <nixl.h>

#include "compat_support.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

using compat_test::expect;
using compat_test::failures;

char junk;  // what an out-parameter holds before the call: a non-null value
template <class T>
T* stale() {
  return reinterpret_cast<T*>(&junk);
}

}  // namespace

int main() {
  nixlAgent a("outs-a", nixlAgentConfig(false));

  // createBackend: an unknown plugin, then a second UCX.
  nixlBackendH* bh = stale<nixlBackendH>();
  expect(a.createBackend("NO_SUCH_PLUGIN", {}, bh) != NIXL_SUCCESS, "createBackend(unknown) fails");
  expect(bh == nullptr, "createBackend(unknown): backend is null");
  nixlBackendH* ucx = nullptr;
  if (a.createBackend("UCX", {}, ucx) != NIXL_SUCCESS || ucx == nullptr) {
    std::printf("SKIPPED: no UCX backend\n");
    return 77;
  }
  bh = stale<nixlBackendH>();
  expect(a.createBackend("UCX", {}, bh) != NIXL_SUCCESS, "createBackend(twice) fails");
  expect(bh == nullptr, "createBackend(twice): backend is null");

  std::vector<char> mem(1 << 16, 1), other(1 << 16, 2);
  const auto addr = reinterpret_cast<uintptr_t>(mem.data());
  nixl_reg_dlist_t reg(DRAM_SEG);
  reg.addDesc(nixlBlobDesc(addr, mem.size(), 0, ""));
  expect(a.registerMem(reg) == NIXL_SUCCESS, "registerMem");
  nixl_xfer_dlist_t descs(DRAM_SEG);
  descs.addDesc(nixlBasicDesc(addr, mem.size(), 0));
  nixl_xfer_dlist_t unregistered(DRAM_SEG);
  unregistered.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(other.data()), other.size(), 0));

  // prepXferDlist, both overloads.
  nixlDlistH* dh = stale<nixlDlistH>();
  expect(a.prepXferDlist("no-such-agent", descs, dh) != NIXL_SUCCESS,
         "prepXferDlist(unknown agent) fails");
  expect(dh == nullptr, "prepXferDlist(unknown agent): Dst side is null");
  dh = stale<nixlDlistH>();
  expect(a.prepXferDlist(unregistered, dh) != NIXL_SUCCESS, "prepXferDlist(unregistered) fails");
  expect(dh == nullptr, "prepXferDlist(unregistered): Src side is null");
  dh = stale<nixlDlistH>();
  expect(a.prepXferDlist(NIXL_INIT_AGENT, unregistered, dh) != NIXL_SUCCESS,
         "prepXferDlist(NIXL_INIT_AGENT, unregistered) fails");
  expect(dh == nullptr, "prepXferDlist(NIXL_INIT_AGENT, unregistered): handle is null");

  // makeXferReq: bad handles, then indices out of range.
  nixlDlistH *local = nullptr, *self = nullptr;
  expect(a.prepXferDlist(NIXL_INIT_AGENT, descs, local) == NIXL_SUCCESS && local != nullptr,
         "prepXferDlist(local)");
  expect(a.prepXferDlist("outs-a", descs, self) == NIXL_SUCCESS && self != nullptr,
         "prepXferDlist(own name)");
  nixlXferReqH* req = stale<nixlXferReqH>();
  expect(a.makeXferReq(NIXL_WRITE, nullptr, {0}, self, {0}, req) != NIXL_SUCCESS,
         "makeXferReq(null handle) fails");
  expect(req == nullptr, "makeXferReq(null handle): request is null");
  req = stale<nixlXferReqH>();
  expect(a.makeXferReq(NIXL_WRITE, self, {0}, local, {0}, req) != NIXL_SUCCESS,
         "makeXferReq(sides swapped) fails");
  expect(req == nullptr, "makeXferReq(sides swapped): request is null");
  req = stale<nixlXferReqH>();
  expect(a.makeXferReq(NIXL_WRITE, local, {7}, self, {0}, req) != NIXL_SUCCESS,
         "makeXferReq(index out of range) fails");
  expect(req == nullptr, "makeXferReq(index out of range): request is null");

  // createXferReq: an unknown remote, then unregistered memory.
  req = stale<nixlXferReqH>();
  expect(a.createXferReq(NIXL_WRITE, descs, descs, "no-such-agent", req) != NIXL_SUCCESS,
         "createXferReq(unknown agent) fails");
  expect(req == nullptr, "createXferReq(unknown agent): request is null");
  req = stale<nixlXferReqH>();
  expect(a.createXferReq(NIXL_WRITE, unregistered, descs, "outs-a", req) != NIXL_SUCCESS,
         "createXferReq(unregistered) fails");
  expect(req == nullptr, "createXferReq(unregistered): request is null");

  // queryXferBackend of a request that is not one.
  bh = stale<nixlBackendH>();
  expect(a.queryXferBackend(nullptr, bh) != NIXL_SUCCESS, "queryXferBackend(null) fails");
  expect(bh == nullptr, "queryXferBackend(null): backend is null");

  // prepMemView (no GPU device API in this build, or unregistered memory).
  nixlMemViewH mv = &junk;
  nixl_remote_dlist_t remote(DRAM_SEG);
  remote.addDesc(nixlRemoteDesc(addr, mem.size(), 0, "no-such-agent"));
  if (a.prepMemView(remote, mv) != NIXL_SUCCESS) expect(mv == nullptr, "prepMemView(remote): null");
  mv = &junk;
  nixl_local_dlist_t loc(DRAM_SEG);
  loc.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(other.data()), other.size(), 0));
  if (a.prepMemView(loc, mv) != NIXL_SUCCESS) expect(mv == nullptr, "prepMemView(local): null");

  // A success still hands the handles out.
  req = nullptr;
  expect(a.makeXferReq(NIXL_WRITE, local, {0}, self, {0}, req) == NIXL_SUCCESS && req != nullptr,
         "makeXferReq(valid)");
  bh = nullptr;
  expect(a.queryXferBackend(req, bh) == NIXL_SUCCESS && bh == ucx, "queryXferBackend(valid)");
  expect(a.releaseXferReq(req) == NIXL_SUCCESS, "releaseXferReq");
  expect(a.releasedDlistH(local) == NIXL_SUCCESS && a.releasedDlistH(self) == NIXL_SUCCESS,
         "releasedDlistH");
  expect(a.deregisterMem(reg) == NIXL_SUCCESS, "deregisterMem");

  if (failures != 0) return 1;
  std::printf("out-parameters after failures: OK\n");
  return 0;
}
