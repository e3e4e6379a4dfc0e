// NIXL's C++ API (nixl.h), exercised as NIXL programs use it: types and descriptor lists, two
// agents with UCX in one process (WRITE and READ with notifications, prepared lists and index
// requests, partial metadata, the listener's send/fetch/invalidate), POSIX loopback to files,
// and the error statuses NIXL documents.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "compat_support.hpp"
#include "nixl.h"
#include "nixl_test/catch.hpp"
#include "utils/serdes/serdes.h"

using namespace compat_test;

namespace {

bool has_plugin(const std::string& name) {
  nixlAgent a("probe", nixlAgentConfig());
  std::vector<nixl_backend_t> p;
  a.getAvailPlugins(p);
  return std::find(p.begin(), p.end(), name) != p.end();
}

/// Two agents with UCX that know each other's full metadata.
struct ucx_pair {
  ucx_pair(bool telemetry = false)
      : a("initiator", ucx_config(telemetry)), b("target", ucx_config(telemetry)) {
    REQUIRE(a.createBackend("UCX", {}, ba) == NIXL_SUCCESS);
    REQUIRE(b.createBackend("UCX", {}, bb) == NIXL_SUCCESS);
  }
  void connect() {
    std::string an, bn;
    exchange_md(a, b, an, bn);
    REQUIRE(an == "initiator");
    REQUIRE(bn == "target");
  }
  nixlAgent a, b;
  nixlBackendH* ba = nullptr;
  nixlBackendH* bb = nullptr;
};

}  // namespace

TEST_CASE("compat: enum values and strings are NIXL's", "[compat]") {
  STATIC_REQUIRE(DRAM_SEG == 0);
  STATIC_REQUIRE(FILE_SEG == 4);
  STATIC_REQUIRE(NIXL_WRITE == 1);
  STATIC_REQUIRE(NIXL_ERR_NOT_POSTED == -1);
  STATIC_REQUIRE(NIXL_ERR_NO_TELEMETRY == -12);
  STATIC_REQUIRE(NIXL_ERR_XFER_STALLED == -13);
  STATIC_REQUIRE(sizeof(nixlBasicDesc) == 24);
  STATIC_REQUIRE(default_comm_port == 8888);
  CHECK(nixlEnumStrings::memTypeStr(OBJ_SEG) == "OBJ_SEG");
  CHECK(nixlEnumStrings::memTypeStr(static_cast<nixl_mem_t>(7)) == "BAD_SEG");
  CHECK(nixlEnumStrings::xferOpStr(NIXL_READ) == "READ");
  CHECK(nixlEnumStrings::statusStr(NIXL_ERR_REMOTE_DISCONNECT) == "NIXL_ERR_REMOTE_DISCONNECT");
  CHECK(nixlEnumStrings::statusStr(static_cast<nixl_status_t>(-40)) == "BAD_STATUS");
  CHECK(nixlEnumStrings::statusStr(NIXL_ERR_XFER_STALLED) == "NIXL_ERR_XFER_STALLED");
  CHECK(nixlEnumStrings::statusStr(static_cast<nixl_status_t>(-14)) == "BAD_STATUS");
  CHECK(default_metadata_label == "metadata");
  CHECK(nixl_null_agent == "NULL_AGENT");

  nixlAgentConfig d;
  CHECK_FALSE(d.useProgThread);
  CHECK(d.listenPort == 8888);
  CHECK(d.lthrDelay == 100000);
  nixlAgentConfig c(true, false, 1234, nixl_thread_sync_t::NIXL_THREAD_SYNC_RW, 4, 10);
  CHECK(c.useProgThread);
  CHECK(c.listenPort == 1234);
  CHECK(c.pthrDelay == 10);
  CHECK(d.xferStallTimeout.count() == 0);  // off by default
  CHECK(nixlAgentConfig::kDefaultXferStallTimeout.count() == 0);
  nixlAgentConfig s(true, false, 0, nixl_thread_sync_t::NIXL_THREAD_SYNC_NONE, 1, 0, 100000, false,
                    std::chrono::microseconds(5000000), std::chrono::microseconds(250000));
  CHECK(s.xferStallTimeout == std::chrono::microseconds(250000));

  nixl_opt_args_t args;
  CHECK(args.port == default_comm_port);
  CHECK_FALSE(args.hasNotif);
  CHECK_FALSE(args.notif.has_value());
}

TEST_CASE("compat: descriptor classes behave as NIXL's", "[compat]") {
  nixlBasicDesc a(0x1000, 256, 1), b(0x1010, 16, 1), c(0x1010, 16, 2);
  CHECK(a.covers(b));
  CHECK_FALSE(a.covers(c));
  CHECK(a.overlaps(b));
  CHECK(b < c);
  CHECK(nixlBasicDesc(a.serialize()) == a);
  CHECK(nixlBasicDesc(std::string("short")) == nixlBasicDesc(0, 0, 0));

  nixlBlobDesc m(0x1000, 256, 1, "meta");
  CHECK(nixlBlobDesc(m.serialize()) == m);
  CHECK_FALSE(m == nixlBlobDesc(0x1000, 256, 1, "other"));
  nixlRemoteDesc r(0x10, 8, 0, "peer");
  CHECK(nixlRemoteDesc(r.serialize()) == r);

  nixl_reg_dlist_t l(DRAM_SEG);
  l.addDesc(m);
  l.emplace(0x2000, 64, 1, "x");
  CHECK(l.descCount() == 2);
  CHECK(l.getIndex(nixlBasicDesc(0x2000, 64, 1)) == 1);
  CHECK(l.getIndex(nixlBasicDesc(0x2000, 65, 1)) == NIXL_ERR_NOT_FOUND);
  auto t = l.trim();
  CHECK(t.getType() == DRAM_SEG);
  CHECK(t[1] == nixlBasicDesc(0x2000, 64, 1));
  CHECK_THROWS_AS(l.remDesc(5), std::out_of_range);
  l.remDesc(0);
  CHECK(l.descCount() == 1);
  nixl_reg_dlist_t l2(DRAM_SEG);
  l2.addDesc(nixlBlobDesc(0x2000, 64, 1, "different meta"));
  CHECK(l == l2);  // lists compare ranges only
  l.resize(3);
  CHECK(l[2] == nixlBasicDesc(0, 0, 0));
  CHECK(l.to_string().find("DRAM_SEG") != std::string::npos);
  nixl_xfer_dlist_t sized(VRAM_SEG, 2);
  CHECK(sized.descCount() == 2);
  CHECK_FALSE(sized.isEmpty());
}

TEST_CASE("compat: agent, plugins and backends", "[compat]") {
  CHECK_THROWS_AS(nixlAgent("", nixlAgentConfig()), std::invalid_argument);
  nixlAgent a("a", nixlAgentConfig());
  std::vector<nixl_backend_t> plugins;
  REQUIRE(a.getAvailPlugins(plugins) == NIXL_SUCCESS);
  REQUIRE_FALSE(plugins.empty());

  nixl_mem_list_t mems;
  nixl_b_params_t params;
  CHECK(a.getPluginParams("NO_SUCH_PLUGIN", mems, params) == NIXL_ERR_NOT_FOUND);
  nixlBackendH* h = nullptr;
  CHECK(a.createBackend("NO_SUCH_PLUGIN", {}, h) == NIXL_ERR_NOT_FOUND);
  CHECK(h == nullptr);

  for (const auto& p : plugins) {
    if (p != "UCX" && p != "POSIX") continue;  // backends that need no device
    INFO(p);
    REQUIRE(a.getPluginParams(p, mems, params) == NIXL_SUCCESS);
    CHECK_FALSE(mems.empty());
    REQUIRE(a.createBackend(p, params, h) == NIXL_SUCCESS);
    REQUIRE(h != nullptr);
    CHECK(h->getType() == p);
    nixlBackendH* again = h;
    CHECK(a.createBackend(p, {}, again) == NIXL_ERR_INVALID_PARAM);  // one per type
    CHECK(again == nullptr);  // a failed call leaves the out-handle null, as NIXL's
    nixl_mem_list_t bm;
    nixl_b_params_t bp;
    REQUIRE(a.getBackendParams(h, bm, bp) == NIXL_SUCCESS);
    CHECK(bm == mems);
    if (p == "UCX") {
      // NIXL's value, which programs hand back to createBackend (as above): the fast default
      CHECK(params.at("ucx_error_handling_mode") == "peer");
      CHECK(h->supportsRemote());
      CHECK(h->supportsNotif());
      CHECK(std::find(bm.begin(), bm.end(), DRAM_SEG) != bm.end());
    } else {
      CHECK_FALSE(h->supportsRemote());
      CHECK(h->supportsLocal());
      CHECK(std::find(bm.begin(), bm.end(), FILE_SEG) != bm.end());
    }
  }
  nixlAgent other("other", nixlAgentConfig());
  nixl_mem_list_t bm;
  nixl_b_params_t bp;
  if (h != nullptr) CHECK(other.getBackendParams(h, bm, bp) == NIXL_ERR_INVALID_PARAM);
}

TEST_CASE("compat: two UCX agents, WRITE and READ with notifications", "[compat][ucx]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  ucx_pair p(true);
  const std::size_t n = 1 << 20;
  buffer src(n, 1), dst(n, 2);
  auto src_reg = reg_list(DRAM_SEG, {nixlBlobDesc(src.addr(), n, 0, "")});
  auto dst_reg = reg_list(DRAM_SEG, {nixlBlobDesc(dst.addr(), n, 0, "")});
  REQUIRE(p.a.registerMem(src_reg) == NIXL_SUCCESS);
  nixl_opt_args_t only_ucx;
  only_ucx.backends.push_back(p.bb);
  REQUIRE(p.b.registerMem(dst_reg, &only_ucx) == NIXL_SUCCESS);
  p.connect();
  REQUIRE(p.a.makeConnection("target") == NIXL_SUCCESS);

  auto local = xfer_list(DRAM_SEG, {nixlBasicDesc(src.addr(), n, 0)});
  auto remote = xfer_list(DRAM_SEG, {nixlBasicDesc(dst.addr(), n, 0)});
  CHECK(p.a.checkRemoteMD("target", remote) == NIXL_SUCCESS);

  nixl_opt_args_t args;
  args.notif = "written";
  nixlXferReqH* req = nullptr;
  REQUIRE(p.a.createXferReq(NIXL_WRITE, local, remote, "target", req, &args) == NIXL_SUCCESS);
  REQUIRE(req != nullptr);
  CHECK(p.a.getXferStatus(req) == NIXL_ERR_NOT_POSTED);
  nixl_xfer_telem_t tel{};
  CHECK(p.a.getXferTelemetry(req, tel) == NIXL_ERR_NOT_POSTED);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  auto got = wait_notifs(p.b, "initiator", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "written");
  CHECK(dst.holds(1));

  REQUIRE(p.a.getXferTelemetry(req, tel) == NIXL_SUCCESS);
  CHECK(tel.totalBytes == n);
  CHECK(tel.descCount == 1);
  CHECK(tel.xferDuration >= tel.postDuration);
  nixlBackendH* used = nullptr;
  REQUIRE(p.a.queryXferBackend(req, used) == NIXL_SUCCESS);
  CHECK(used == p.ba);

  // Repost with a new notification given at post time; then with arguments that carry none,
  // which clears it (NIXL: non-null arguments replace the stored notification).
  dst.fill(3);
  nixl_opt_args_t again;
  again.hasNotif = true;
  again.notifMsg = "again";
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req, &again)) == NIXL_SUCCESS);
  got = wait_notifs(p.b, "initiator", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "again");
  CHECK(dst.holds(1));
  nixl_opt_args_t none;
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req, &none)) == NIXL_SUCCESS);
  nixl_notifs_t m;
  std::this_thread::sleep_for(50ms);
  REQUIRE(p.b.getNotifs(m) == NIXL_SUCCESS);
  CHECK(m["initiator"].empty());
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);

  // READ back into a fresh source.
  dst.fill(4);
  src.fill(0);
  nixl_opt_args_t rd;
  rd.notif = "read";
  REQUIRE(p.a.createXferReq(NIXL_READ, local, remote, "target", req, &rd) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(src.holds(4));
  got = wait_notifs(p.b, "initiator", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "read");
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);

  // Standalone notifications both ways, binary-safe.
  const nixl_blob_t bin("a\0b", 3);
  REQUIRE(p.a.genNotif("target", bin) == NIXL_SUCCESS);
  got = wait_notifs(p.b, "initiator", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == bin);
  REQUIRE(p.b.genNotif("initiator", "back") == NIXL_SUCCESS);
  got = wait_notifs(p.a, "target", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "back");

  // Invalidated peer: requests to it fail, its metadata is gone.
  REQUIRE(p.a.createXferReq(NIXL_WRITE, local, remote, "target", req) == NIXL_SUCCESS);
  REQUIRE(p.a.invalidateRemoteMD("target") == NIXL_SUCCESS);
  CHECK(p.a.postXferReq(req) == NIXL_ERR_NOT_FOUND);
  CHECK(p.a.checkRemoteMD("target", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_ERR_NOT_FOUND);
  CHECK(p.a.invalidateRemoteMD("target") == NIXL_ERR_NOT_FOUND);
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);
  CHECK(p.a.deregisterMem(src_reg) == NIXL_SUCCESS);
  CHECK(p.b.deregisterMem(dst_reg) == NIXL_SUCCESS);
}

TEST_CASE("compat: waitXferReq, waitNotifs and the event fd (nixl-cpp's own)", "[compat][ucx]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  ucx_pair p(true);
  const std::size_t n = 1 << 20;
  buffer src(n, 3), dst(n, 4);
  REQUIRE(p.a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(src.addr(), n, 0, "")})) ==
          NIXL_SUCCESS);
  REQUIRE(p.b.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(dst.addr(), n, 0, "")})) ==
          NIXL_SUCCESS);
  p.connect();
  const int fd = p.b.getEventFd();
  CHECK(fd >= 0);
  CHECK(p.b.getEventFd() == fd);  // the agent keeps one
  p.b.drainEvents();
  nixl_notifs_t notifs;
  CHECK(p.b.waitNotifs(notifs, std::chrono::milliseconds(1)) == NIXL_IN_PROG);
  CHECK(notifs.empty());
  nixl_opt_args_t args;
  args.notif = "waited";
  nixlXferReqH* req = nullptr;
  REQUIRE(p.a.createXferReq(NIXL_WRITE, xfer_list(DRAM_SEG, {nixlBasicDesc(src.addr(), n, 0)}),
                            xfer_list(DRAM_SEG, {nixlBasicDesc(dst.addr(), n, 0)}), "target", req,
                            &args) == NIXL_SUCCESS);
  const nixl_status_t posted = p.a.postXferReq(req);
  REQUIRE((posted == NIXL_SUCCESS || posted == NIXL_IN_PROG));
  const nixl_status_t peeked = p.a.peekXferReq(req);
  CHECK((peeked == NIXL_SUCCESS || peeked == NIXL_IN_PROG));
  CHECK(p.a.waitXferReq(req, std::chrono::seconds(10)) == NIXL_SUCCESS);
  CHECK(p.a.peekXferReq(req) == NIXL_SUCCESS);
  CHECK(p.a.getXferStatus(req) == NIXL_SUCCESS);
  // the notification arrives after the data: the wait ends with it
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (notifs["initiator"].empty() && std::chrono::steady_clock::now() < end)
    CHECK(p.b.waitNotifs(notifs, std::chrono::seconds(1)) != NIXL_ERR_BACKEND);
  REQUIRE(notifs["initiator"] == std::vector<std::string>{"waited"});
  CHECK(dst.holds(3));
  CHECK(p.a.waitXferReq(nullptr, std::chrono::seconds(0)) == NIXL_ERR_INVALID_PARAM);
  CHECK(p.a.peekXferReq(nullptr) == NIXL_ERR_INVALID_PARAM);
  CHECK(p.a.releaseXferReq(req) == NIXL_SUCCESS);
  // nixl-cpp's own: no agent is gone (the list is replaced; capi_test sees one found gone)
  std::vector<std::string> gone{"stale"};
  CHECK(p.b.getGoneAgents(gone) == NIXL_SUCCESS);
  CHECK(gone.empty());
}

TEST_CASE("compat: xferStallTimeout ends a stalled request with NIXL_ERR_XFER_STALLED",
          "[compat][ucx]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  // Over tcp a put needs the target's worker; the target has no progress thread and is only
  // progressed by the calls made on it, so a large WRITE stalls while it is left alone.
  ::setenv("UCX_TLS", "tcp", 1);
  struct unset {
    ~unset() { ::unsetenv("UCX_TLS"); }
  } restore;
  nixlAgentConfig ic(true);
  ic.xferStallTimeout = std::chrono::milliseconds(300);
  nixlAgent a("initiator", ic), b("target", nixlAgentConfig(false));
  nixlBackendH *ba = nullptr, *bb = nullptr;
  REQUIRE(a.createBackend("UCX", {}, ba) == NIXL_SUCCESS);
  REQUIRE(b.createBackend("UCX", {}, bb) == NIXL_SUCCESS);
  const std::size_t n = std::size_t{64} << 20;
  buffer src(n + 4096, 1), dst(n + 4096, 0);
  auto src_reg = reg_list(DRAM_SEG, {nixlBlobDesc(src.addr(), src.size, 0, "")});
  auto dst_reg = reg_list(DRAM_SEG, {nixlBlobDesc(dst.addr(), dst.size, 0, "")});
  REQUIRE(a.registerMem(src_reg) == NIXL_SUCCESS);
  REQUIRE(b.registerMem(dst_reg) == NIXL_SUCCESS);
  std::string an, bn;
  exchange_md(a, b, an, bn);
  REQUIRE(bn == "target");
  nixl_notifs_t m;
  // Polls `r` to its end while the target progresses (getNotifs runs its worker).
  auto served = [&](nixlXferReqH* r) {
    nixl_status_t s = a.postXferReq(r);
    eventually([&] {
      b.getNotifs(m);
      if (s == NIXL_IN_PROG) s = a.getXferStatus(r);
      return s != NIXL_IN_PROG;
    });
    return s;
  };
  auto tail = xfer_list(DRAM_SEG, {nixlBasicDesc(src.addr() + n, 4096, 0)});
  auto tail_r = xfer_list(DRAM_SEG, {nixlBasicDesc(dst.addr() + n, 4096, 0)});
  nixlXferReqH* warm = nullptr;
  REQUIRE(a.createXferReq(NIXL_WRITE, tail, tail_r, "target", warm) == NIXL_SUCCESS);
  REQUIRE(served(warm) == NIXL_SUCCESS);  // the lanes are connected

  auto big = xfer_list(DRAM_SEG, {nixlBasicDesc(src.addr(), n, 0)});
  auto big_r = xfer_list(DRAM_SEG, {nixlBasicDesc(dst.addr(), n, 0)});
  nixlXferReqH* req = nullptr;
  nixl_opt_args_t with_notif;
  with_notif.notifMsg = "kv-5";
  with_notif.hasNotif = true;
  REQUIRE(a.createXferReq(NIXL_WRITE, big, big_r, "target", req, &with_notif) == NIXL_SUCCESS);
  const auto t0 = std::chrono::steady_clock::now();
  nixl_status_t s = a.postXferReq(req);
  CHECK(s == NIXL_IN_PROG);
  s = wait_xfer(a, req, s);
  CHECK(s == NIXL_ERR_XFER_STALLED);
  CHECK(std::chrono::steady_clock::now() - t0 >= 300ms);
  CHECK(a.getXferStatus(req) == NIXL_ERR_XFER_STALLED);  // sticky
  CHECK(a.postXferReq(req) == NIXL_ERR_XFER_STALLED);    // make a new request
  CHECK(a.releaseXferReq(req) == NIXL_SUCCESS);
  // The target is told once the stalled data is in (its getNotifs progresses it): an abort
  // notice with the message, not the notification.
  nixl_notifs_t aborted;
  eventually([&] {
    b.getNotifs(m);
    return b.getAbortedNotifs(aborted) == NIXL_SUCCESS && !aborted.empty();
  });
  CHECK(aborted[an] == std::vector<std::string>{"kv-5"});
  CHECK(m[an].empty());

  // A per-request timeout (nixl_opt_args_t::xferStallTimeout) wins over the agent's: off here,
  // and the target served, so the same WRITE completes.
  nixl_opt_args_t no_stall;
  no_stall.xferStallTimeout = std::chrono::microseconds(-1);
  REQUIRE(a.createXferReq(NIXL_WRITE, big, big_r, "target", req, &no_stall) == NIXL_SUCCESS);
  CHECK(served(req) == NIXL_SUCCESS);
  CHECK(dst.holds(1, 0, n));
  CHECK(a.releaseXferReq(req) == NIXL_SUCCESS);
  src.fill(2);
  CHECK(served(warm) == NIXL_SUCCESS);  // the agent keeps serving the peer
  CHECK(dst.holds(2, n, 4096));
  CHECK(a.releaseXferReq(warm) == NIXL_SUCCESS);
}

TEST_CASE("compat: prepared lists and index requests", "[compat][ucx]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  ucx_pair p(true);
  const std::size_t blk = 4096, count = 8;
  buffer src(blk * count, 5), dst(blk * count, 6);
  REQUIRE(p.a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(src.addr(), src.size, 0, "")})) ==
          NIXL_SUCCESS);
  REQUIRE(p.b.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(dst.addr(), dst.size, 0, "")})) ==
          NIXL_SUCCESS);
  p.connect();

  nixl_xfer_dlist_t ll(DRAM_SEG), rl(DRAM_SEG);
  for (std::size_t i = 0; i < count; ++i) {
    ll.addDesc(nixlBasicDesc(src.addr() + i * blk, blk, 0));
    rl.addDesc(nixlBasicDesc(dst.addr() + i * blk, blk, 0));
  }
  nixlDlistH *lh = nullptr, *rh = nullptr, *bad = nullptr;
  REQUIRE(p.a.prepXferDlist(NIXL_INIT_AGENT, ll, lh) == NIXL_SUCCESS);
  REQUIRE(p.a.prepXferDlist("target", rl, rh) == NIXL_SUCCESS);
  CHECK(p.a.prepXferDlist("nobody", rl, bad) == NIXL_ERR_NOT_FOUND);
  CHECK(bad == nullptr);
  auto outside = xfer_list(DRAM_SEG, {nixlBasicDesc(dst.addr() + dst.size, blk, 0)});
  CHECK(p.a.prepXferDlist("target", outside, bad) == NIXL_ERR_NOT_FOUND);

  nixlXferReqH* req = nullptr;
  // Index checks.
  CHECK(p.a.makeXferReq(NIXL_WRITE, lh, {0, 1}, rh, {0}, req) == NIXL_ERR_INVALID_PARAM);
  CHECK(p.a.makeXferReq(NIXL_WRITE, lh, {0, 99}, rh, {0, 1}, req) == NIXL_ERR_INVALID_PARAM);
  CHECK(p.a.makeXferReq(NIXL_WRITE, lh, {}, rh, {}, req) == NIXL_ERR_INVALID_PARAM);
  CHECK(p.a.makeXferReq(NIXL_WRITE, rh, {0}, lh, {0}, req) == NIXL_ERR_INVALID_PARAM);
  CHECK(p.a.makeXferReq(NIXL_WRITE, nullptr, {0}, rh, {0}, req) == NIXL_ERR_INVALID_PARAM);

  // Blocks 2..5 to 4..7: contiguous on both sides, so merged into one descriptor.
  nixl_opt_args_t args;
  args.notif = "blocks";
  REQUIRE(p.a.makeXferReq(NIXL_WRITE, lh, {2, 3, 4, 5}, rh, {4, 5, 6, 7}, req, &args) ==
          NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  nixl_xfer_telem_t tel{};
  REQUIRE(p.a.getXferTelemetry(req, tel) == NIXL_SUCCESS);
  CHECK(tel.descCount == 1);
  CHECK(tel.totalBytes == 4 * blk);
  CHECK(dst.holds(6, 0, 4 * blk));
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(std::memcmp(dst.p + (4 + i) * blk, src.p + (2 + i) * blk, blk) == 0);
  CHECK(wait_notifs(p.b, "initiator", 1) == std::vector<std::string>{"blocks"});
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);

  // The same without merging; and a READ of reversed blocks.
  nixl_opt_args_t keep;
  keep.skipDescMerge = true;
  REQUIRE(p.a.makeXferReq(NIXL_WRITE, lh, {0, 1, 2}, rh, {0, 1, 2}, req, &keep) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  REQUIRE(p.a.getXferTelemetry(req, tel) == NIXL_SUCCESS);
  CHECK(tel.descCount == 3);
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);
  src.fill(0);
  REQUIRE(p.a.makeXferReq(NIXL_READ, lh, {0, 1}, rh, {7, 6}, req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(std::memcmp(src.p, dst.p + 7 * blk, blk) == 0);
  CHECK(std::memcmp(src.p + blk, dst.p + 6 * blk, blk) == 0);
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);

  // createXferReq never merges (as NIXL): two contiguous descriptors stay two.
  nixl_xfer_dlist_t l2(DRAM_SEG), r2(DRAM_SEG);
  for (std::size_t i = 0; i < 2; ++i) {
    l2.addDesc(nixlBasicDesc(src.addr() + i * 64, 64, 0));
    r2.addDesc(nixlBasicDesc(dst.addr() + i * 64, 64, 0));
  }
  REQUIRE(p.a.createXferReq(NIXL_WRITE, l2, r2, "target", req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  REQUIRE(p.a.getXferTelemetry(req, tel) == NIXL_SUCCESS);
  CHECK(tel.descCount == 2);
  CHECK(tel.totalBytes == 128);
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);

  // Loopback: the agent's own name prepares its own memory as a target.
  nixlDlistH* self = nullptr;
  REQUIRE(p.a.prepXferDlist("initiator", ll, self) == NIXL_SUCCESS);
  REQUIRE(p.a.makeXferReq(NIXL_WRITE, lh, {0}, self, {1}, req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(std::memcmp(src.p, src.p + blk, blk) == 0);
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);

  CHECK(p.a.releasedDlistH(self) == NIXL_SUCCESS);
  CHECK(p.a.releasedDlistH(lh) == NIXL_SUCCESS);
  CHECK(p.a.releasedDlistH(rh) == NIXL_SUCCESS);
  CHECK(p.a.releasedDlistH(nullptr) == NIXL_ERR_INVALID_PARAM);
}

TEST_CASE("compat: partial metadata", "[compat][ucx]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  ucx_pair p;
  buffer one(4096, 1), two(4096, 2), mine(4096, 3);
  auto r1 = reg_list(DRAM_SEG, {nixlBlobDesc(one.addr(), 4096, 0, "")});
  auto r2 = reg_list(DRAM_SEG, {nixlBlobDesc(two.addr(), 4096, 0, "")});
  REQUIRE(p.b.registerMem(r1) == NIXL_SUCCESS);
  REQUIRE(p.b.registerMem(r2) == NIXL_SUCCESS);
  REQUIRE(p.a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(mine.addr(), 4096, 0, "")})) ==
          NIXL_SUCCESS);
  auto x1 = xfer_list(DRAM_SEG, {nixlBasicDesc(one.addr(), 4096, 0)});
  auto x2 = xfer_list(DRAM_SEG, {nixlBasicDesc(two.addr(), 4096, 0)});

  // Connection info only, then one region, then the other.
  nixl_blob_t md;
  std::string name;
  REQUIRE(p.b.getLocalPartialMD(nixl_reg_dlist_t(DRAM_SEG), md) == NIXL_SUCCESS);
  REQUIRE(p.a.loadRemoteMD(md, name) == NIXL_SUCCESS);
  CHECK(name == "target");
  CHECK(p.a.checkRemoteMD("target", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_SUCCESS);
  CHECK(p.a.checkRemoteMD("target", x1) == NIXL_ERR_NOT_FOUND);
  REQUIRE(p.b.getLocalPartialMD(r1, md) == NIXL_SUCCESS);
  REQUIRE(p.a.loadRemoteMD(md, name) == NIXL_SUCCESS);
  CHECK(p.a.checkRemoteMD("target", x1) == NIXL_SUCCESS);
  CHECK(p.a.checkRemoteMD("target", x2) == NIXL_ERR_NOT_FOUND);
  nixl_opt_args_t conn;
  conn.includeConnInfo = true;
  REQUIRE(p.b.getLocalPartialMD(r2, md, &conn) == NIXL_SUCCESS);
  REQUIRE(p.a.loadRemoteMD(md, name) == NIXL_SUCCESS);  // same connection info: accepted
  CHECK(p.a.checkRemoteMD("target", x2) == NIXL_SUCCESS);

  auto bad = reg_list(DRAM_SEG, {nixlBlobDesc(one.addr(), 100, 0, "")});
  CHECK(p.b.getLocalPartialMD(bad, md) != NIXL_SUCCESS);

  nixlXferReqH* req = nullptr;
  auto lx = xfer_list(DRAM_SEG, {nixlBasicDesc(mine.addr(), 4096, 0)});
  REQUIRE(p.a.createXferReq(NIXL_READ, lx, x2, "target", req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(p.a, req, p.a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(mine.holds(2));
  REQUIRE(p.a.releaseXferReq(req) == NIXL_SUCCESS);
}

TEST_CASE("compat: the listener's send, fetch and invalidate", "[compat][ucx][listener]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  const uint16_t pa = free_port(), pb = free_port();
  REQUIRE(pa != 0);
  REQUIRE(pb != 0);
  nixlAgentConfig ca(true, true, pa), cb(true, true, pb);
  nixlAgent a("lis-a", ca), b("lis-b", cb);
  nixlBackendH *ha = nullptr, *hb = nullptr;
  REQUIRE(a.createBackend("UCX", {}, ha) == NIXL_SUCCESS);
  REQUIRE(b.createBackend("UCX", {}, hb) == NIXL_SUCCESS);
  buffer buf(8192, 7), dst(8192, 0);
  REQUIRE(b.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(buf.addr(), buf.size, 0, "")})) ==
          NIXL_SUCCESS);
  REQUIRE(a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(dst.addr(), dst.size, 0, "")})) ==
          NIXL_SUCCESS);
  const auto bx = xfer_list(DRAM_SEG, {nixlBasicDesc(buf.addr(), buf.size, 0)});
  const auto ax = xfer_list(DRAM_SEG, {nixlBasicDesc(dst.addr(), dst.size, 0)});

  nixl_opt_args_t to_a, to_b;
  to_a.ipAddr = "127.0.0.1";
  to_a.port = pa;
  to_b.ipAddr = "127.0.0.1";
  to_b.port = pb;

  // b pushes its metadata to a's listener.
  REQUIRE(b.sendLocalMD(&to_a) == NIXL_SUCCESS);
  REQUIRE(eventually([&] { return a.checkRemoteMD("lis-b", bx) == NIXL_SUCCESS; }));
  // a fetches b's again (accepted: same connection info), and b fetches a's.
  REQUIRE(a.fetchRemoteMD("lis-b", &to_b) == NIXL_SUCCESS);
  REQUIRE(b.fetchRemoteMD("lis-a", &to_a) == NIXL_SUCCESS);
  REQUIRE(eventually([&] { return b.checkRemoteMD("lis-a", ax) == NIXL_SUCCESS; }));

  nixlXferReqH* req = nullptr;
  REQUIRE(a.createXferReq(NIXL_READ, ax, bx, "lis-b", req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(dst.holds(7));
  REQUIRE(a.releaseXferReq(req) == NIXL_SUCCESS);

  // Partial metadata through the listener.
  buffer more(4096, 8);
  auto more_reg = reg_list(DRAM_SEG, {nixlBlobDesc(more.addr(), more.size, 0, "")});
  REQUIRE(b.registerMem(more_reg) == NIXL_SUCCESS);
  const auto mx = xfer_list(DRAM_SEG, {nixlBasicDesc(more.addr(), more.size, 0)});
  CHECK(a.checkRemoteMD("lis-b", mx) == NIXL_ERR_NOT_FOUND);
  REQUIRE(b.sendLocalPartialMD(more_reg, &to_a) == NIXL_SUCCESS);
  REQUIRE(eventually([&] { return a.checkRemoteMD("lis-b", mx) == NIXL_SUCCESS; }));

  // b tells a to forget it.
  REQUIRE(b.invalidateLocalMD(&to_a) == NIXL_SUCCESS);
  REQUIRE(eventually(
      [&] { return a.checkRemoteMD("lis-b", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_ERR_NOT_FOUND; }));

  // Wrong arguments fail on the caller's side.
  nixl_opt_args_t bad_port;
  bad_port.ipAddr = "127.0.0.1";
  bad_port.port = 70000;
  CHECK(b.sendLocalMD(&bad_port) == NIXL_ERR_INVALID_PARAM);
}

TEST_CASE("compat: POSIX loopback to a file", "[compat][posix]") {
  if (!has_plugin("POSIX")) NIXL_SKIP("this build has no POSIX backend");
  nixlAgent a("files", nixlAgentConfig());
  nixlBackendH* posix = nullptr;
  REQUIRE(a.createBackend("POSIX", {}, posix) == NIXL_SUCCESS);
  const auto path = std::filesystem::temp_directory_path() /
                    ("nixl_compat_" + std::to_string(::getpid()) + ".bin");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  const std::size_t n = 64 * 1024;
  buffer out(n, 9), in(n, 0);
  auto mem =
      reg_list(DRAM_SEG, {nixlBlobDesc(out.addr(), n, 0, ""), nixlBlobDesc(in.addr(), n, 0, "")});
  auto file = reg_list(FILE_SEG, {nixlBlobDesc(0, 0, static_cast<uint64_t>(fd), "")});
  REQUIRE(a.registerMem(mem) == NIXL_SUCCESS);
  REQUIRE(a.registerMem(file) == NIXL_SUCCESS);

  auto fx = xfer_list(FILE_SEG, {nixlBasicDesc(4096, n, static_cast<uint64_t>(fd))});
  nixlXferReqH* req = nullptr;
  REQUIRE(a.createXferReq(NIXL_WRITE, xfer_list(DRAM_SEG, {nixlBasicDesc(out.addr(), n, 0)}), fx,
                          "files", req) == NIXL_SUCCESS);
  nixlBackendH* used = nullptr;
  REQUIRE(a.queryXferBackend(req, used) == NIXL_SUCCESS);
  CHECK(used == posix);
  REQUIRE(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  REQUIRE(a.releaseXferReq(req) == NIXL_SUCCESS);
  CHECK(std::filesystem::file_size(path) == 4096 + n);

  REQUIRE(a.createXferReq(NIXL_READ, xfer_list(DRAM_SEG, {nixlBasicDesc(in.addr(), n, 0)}), fx,
                          "files", req) == NIXL_SUCCESS);
  REQUIRE(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(in.holds(9));
  REQUIRE(a.releaseXferReq(req) == NIXL_SUCCESS);

  // queryMem needs exactly one backend.
  std::vector<nixl_query_resp_t> resp;
  auto q = reg_list(FILE_SEG, {nixlBlobDesc(0, 0, 0, path.string()),
                               nixlBlobDesc(0, 0, 0, path.string() + ".missing")});
  CHECK(a.queryMem(q, resp, nullptr) == NIXL_ERR_INVALID_PARAM);
  nixl_opt_args_t only;
  only.backends.push_back(posix);
  REQUIRE(a.queryMem(q, resp, &only) == NIXL_SUCCESS);
  REQUIRE(resp.size() == 2);
  REQUIRE(resp[0].has_value());
  CHECK(resp[0]->at("size") == std::to_string(4096 + n));
  CHECK_FALSE(resp[1].has_value());

  // No remote-capable backend: no full metadata.
  nixl_blob_t md;
  CHECK(a.getLocalMD(md) == NIXL_ERR_INVALID_PARAM);
  CHECK(a.deregisterMem(file) == NIXL_SUCCESS);
  CHECK(a.deregisterMem(mem) == NIXL_SUCCESS);
  ::close(fd);
  std::filesystem::remove(path);
}

TEST_CASE("compat: error statuses", "[compat]") {
  nixlAgent a("errs", ucx_config());
  nixl_blob_t md;
  std::string name;
  // Nothing created yet.
  CHECK(a.getLocalMD(md) == NIXL_ERR_INVALID_PARAM);
  buffer buf(4096);
  auto r = reg_list(DRAM_SEG, {nixlBlobDesc(buf.addr(), 4096, 0, "")});
  CHECK(a.registerMem(r) == NIXL_ERR_NOT_FOUND);
  nixl_notifs_t notifs;
  CHECK(a.getNotifs(notifs) == NIXL_ERR_BACKEND);
  CHECK(a.postXferReq(nullptr) == NIXL_ERR_INVALID_PARAM);
  CHECK(a.getXferStatus(nullptr) == NIXL_ERR_INVALID_PARAM);
  CHECK(a.releaseXferReq(nullptr) == NIXL_ERR_INVALID_PARAM);
  nixlMemViewH mv = nullptr;
  CHECK(a.prepMemView(nixl_xfer_dlist_t(DRAM_SEG), mv) == NIXL_ERR_NOT_FOUND);  // no backend
  nixl_reg_dlist_t bad_type(static_cast<nixl_mem_t>(9));
  CHECK(a.registerMem(bad_type) == NIXL_ERR_INVALID_PARAM);

  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  nixlBackendH* h = nullptr;
  REQUIRE(a.createBackend("UCX", {}, h) == NIXL_SUCCESS);
  REQUIRE(a.getLocalMD(md) == NIXL_SUCCESS);
  CHECK(a.loadRemoteMD(md, name) == NIXL_ERR_INVALID_PARAM);  // own metadata
  CHECK(a.loadRemoteMD("garbage", name) == NIXL_ERR_MISMATCH);
  CHECK(a.invalidateRemoteMD("nobody") == NIXL_ERR_NOT_FOUND);
  CHECK(a.invalidateRemoteMD("errs") == NIXL_ERR_INVALID_PARAM);
  CHECK(a.makeConnection("nobody") == NIXL_ERR_NOT_FOUND);
  CHECK(a.genNotif("nobody", "x") == NIXL_ERR_NOT_FOUND);
  CHECK(a.checkRemoteMD("nobody", nixl_xfer_dlist_t(DRAM_SEG)) == NIXL_ERR_NOT_FOUND);
  CHECK(a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(buf.addr(), 0, 0, "")})) ==
        NIXL_ERR_INVALID_PARAM);
  REQUIRE(a.registerMem(r) == NIXL_SUCCESS);
  CHECK(a.registerMem(r) == NIXL_ERR_INVALID_PARAM);  // registered already
  CHECK(a.deregisterMem(reg_list(DRAM_SEG, {nixlBlobDesc(buf.addr(), 100, 0, "")})) ==
        NIXL_ERR_NOT_FOUND);

  nixlXferReqH* req = nullptr;
  auto x = xfer_list(DRAM_SEG, {nixlBasicDesc(buf.addr(), 2048, 0)});
  auto y = xfer_list(DRAM_SEG, {nixlBasicDesc(buf.addr() + 2048, 1024, 0)});
  CHECK(a.createXferReq(NIXL_WRITE, x, y, "errs", req) == NIXL_ERR_INVALID_PARAM);  // lengths
  CHECK(a.createXferReq(NIXL_WRITE, x, x, "nobody", req) == NIXL_ERR_NOT_FOUND);
  auto z = xfer_list(DRAM_SEG, {nixlBasicDesc(buf.addr() + 2048, 2048, 0)});
  REQUIRE(a.createXferReq(NIXL_WRITE, x, z, "errs", req) == NIXL_SUCCESS);
  nixl_xfer_telem_t tel{};
  REQUIRE(wait_xfer(a, req, a.postXferReq(req)) == NIXL_SUCCESS);
  CHECK(a.getXferTelemetry(req, tel) == NIXL_ERR_NO_TELEMETRY);
  std::chrono::microseconds dur{}, margin{};
  nixl_cost_t method{};
  const auto e = a.estimateXferCost(req, dur, margin, method);
  CHECK((e == NIXL_SUCCESS || e == NIXL_ERR_NOT_SUPPORTED));
  nixlAgent other("other", nixlAgentConfig());
  CHECK(other.postXferReq(req) == NIXL_ERR_INVALID_PARAM);  // another agent's handle
  CHECK(other.releaseXferReq(req) == NIXL_ERR_INVALID_PARAM);
  REQUIRE(a.releaseXferReq(req) == NIXL_SUCCESS);
  // A request left unreleased is freed with its agent.
  REQUIRE(a.createXferReq(NIXL_WRITE, x, z, "errs", req) == NIXL_SUCCESS);
}

TEST_CASE("compat: threads share an agent in NIXL_THREAD_SYNC_RW", "[compat][ucx][threads]") {
  if (!has_plugin("UCX")) NIXL_SKIP("this build has no UCX backend");
  nixlAgentConfig cfg(true, false, default_comm_port, nixl_thread_sync_t::NIXL_THREAD_SYNC_RW);
  nixlAgent a("rw-a", cfg), b("rw-b", cfg);
  nixlBackendH *ha = nullptr, *hb = nullptr;
  REQUIRE(a.createBackend("UCX", {}, ha) == NIXL_SUCCESS);
  REQUIRE(b.createBackend("UCX", {}, hb) == NIXL_SUCCESS);
  constexpr int threads = 4, rounds = 50;
  constexpr std::size_t blk = 4096;
  buffer src(blk * threads, 3), dst(blk * threads, 0);
  REQUIRE(a.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(src.addr(), src.size, 0, "")})) ==
          NIXL_SUCCESS);
  REQUIRE(b.registerMem(reg_list(DRAM_SEG, {nixlBlobDesc(dst.addr(), dst.size, 0, "")})) ==
          NIXL_SUCCESS);
  std::string an, bn;
  exchange_md(a, b, an, bn);
  REQUIRE(bn == "rw-b");
  nixl_xfer_dlist_t whole(DRAM_SEG);
  for (int t = 0; t < threads; ++t) whole.addDesc(nixlBasicDesc(dst.addr() + t * blk, blk, 0));
  nixlDlistH* remote = nullptr;
  REQUIRE(a.prepXferDlist("rw-b", whole, remote) == NIXL_SUCCESS);

  std::vector<int> failures(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto l = xfer_list(DRAM_SEG, {nixlBasicDesc(src.addr() + t * blk, blk, 0)});
      nixlDlistH* local = nullptr;
      if (a.prepXferDlist(NIXL_INIT_AGENT, l, local) != NIXL_SUCCESS) {
        ++failures[t];
        return;
      }
      for (int i = 0; i < rounds; ++i) {
        nixlXferReqH* req = nullptr;
        nixl_opt_args_t args;
        args.notif = std::to_string(t);
        nixlBackendH* used = nullptr;
        if (a.makeXferReq(NIXL_WRITE, local, {0}, remote, {t}, req, &args) != NIXL_SUCCESS ||
            wait_xfer(a, req, a.postXferReq(req)) != NIXL_SUCCESS ||
            a.queryXferBackend(req, used) != NIXL_SUCCESS || used != ha ||
            a.releaseXferReq(req) != NIXL_SUCCESS)
          ++failures[t];
      }
      if (a.releasedDlistH(local) != NIXL_SUCCESS) ++failures[t];
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) CHECK(failures[t] == 0);
  CHECK(std::memcmp(src.p, dst.p, src.size) == 0);
  std::size_t total = 0;
  nixl_notifs_t m;
  eventually([&] {
    if (b.getNotifs(m) != NIXL_SUCCESS) return false;
    total = m["rw-a"].size();
    return total >= static_cast<std::size_t>(threads * rounds);
  });
  CHECK(total == static_cast<std::size_t>(threads * rounds));
  CHECK(a.releasedDlistH(remote) == NIXL_SUCCESS);
}

TEST_CASE("compat: nixlSerDes and descriptor lists through it", "[compat][serdes]") {
  nixlSerDes s;
  const uint64_t number = 0x1122334455667788ull;
  nixl_xfer_dlist_t xl(VRAM_SEG);
  xl.addDesc(nixlBasicDesc(0x1000, 64, 1));
  xl.addDesc(nixlBasicDesc(0x2000, 128, 2));
  nixl_reg_dlist_t rl(FILE_SEG);
  rl.addDesc(nixlBlobDesc(0, 0, 7, "/tmp/a"));
  rl.addDesc(nixlBlobDesc(4096, 10, 8, ""));
  nixl_remote_dlist_t rem(DRAM_SEG);
  rem.addDesc(nixlRemoteDesc(0x10, 8, 0, "peer"));
  REQUIRE(s.addStr("name", "agent-0") == NIXL_SUCCESS);
  REQUIRE(s.addBuf("num", &number, sizeof(number)) == NIXL_SUCCESS);
  REQUIRE(xl.serialize(&s) == NIXL_SUCCESS);
  REQUIRE(rl.serialize(&s) == NIXL_SUCCESS);
  REQUIRE(rem.serialize(&s) == NIXL_SUCCESS);
  REQUIRE(s.addStr("msg", "") == NIXL_SUCCESS);
  const std::string wire = s.exportStr();
  CHECK(wire.rfind("nixlSerDes|", 0) == 0);

  nixlSerDes d;
  REQUIRE(d.importStr(wire) == NIXL_SUCCESS);
  CHECK(d.getStr("wrong-tag").empty());  // tag checked, nothing consumed
  CHECK(d.getStr("name") == "agent-0");
  uint64_t got = 0;
  CHECK(d.getBufLen("num") == 8);
  CHECK(d.getBuf("num", &got, 4) == NIXL_ERR_MISMATCH);  // length checked
  REQUIRE(d.getBuf("num", &got, sizeof(got)) == NIXL_SUCCESS);
  CHECK(got == number);
  nixl_xfer_dlist_t xl2(&d);
  CHECK(xl2 == xl);
  CHECK(xl2.getType() == VRAM_SEG);
  nixl_reg_dlist_t rl2(&d);
  REQUIRE(rl2.descCount() == 2);
  CHECK(rl2[0] == rl[0]);  // with the metadata
  CHECK(rl2[1].metaInfo.empty());
  nixl_remote_dlist_t rem2(&d);
  REQUIRE(rem2.descCount() == 1);
  CHECK(rem2[0] == rem[0]);
  CHECK(d.getStr("msg").empty());

  // Untrusted input: no header, truncated data, a count larger than the data.
  nixlSerDes bad;
  CHECK(bad.importStr("garbage") == NIXL_ERR_MISMATCH);
  for (std::size_t cut : {std::size_t{12}, wire.size() / 2, wire.size() - 2}) {
    nixlSerDes t;
    REQUIRE(t.importStr(wire.substr(0, cut)) == NIXL_SUCCESS);
    t.getStr("name");
    t.getBuf("num", &got, sizeof(got));
    nixl_xfer_dlist_t a(&t);
    nixl_reg_dlist_t b(&t);
    CHECK(a.descCount() <= 2);
    CHECK(b.descCount() <= 2);
  }
  nixlSerDes huge;
  const uint64_t big = uint64_t{1} << 60;
  const nixl_mem_t t = DRAM_SEG;
  huge.addStr("nixlDList", "nixlSDList");
  huge.addBuf("t", &t, sizeof(t));
  huge.addBuf("n", &big, sizeof(big));
  nixlSerDes hr;
  REQUIRE(hr.importStr(huge.exportStr()) == NIXL_SUCCESS);
  nixl_reg_dlist_t h(&hr);
  CHECK(h.isEmpty());
  CHECK(nixlSerDes::_bytesToString(&number, 8).size() == 8);
}
