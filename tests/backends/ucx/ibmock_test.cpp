// The UCX backend over one of UCX's verbs transports in one process, with UCX 1.22's
// contrib/ibmock standing in for libibverbs and libefa (scripts/build-ibmock.sh): registration,
// remote keys, put/get and notifications, and every lane of the endpoints on that transport.
// Hidden ([.]): tests/backends/ucx/ibmock.sh runs it with ibmock on LD_LIBRARY_PATH, UCX_TLS set
// and NIXL_UCX_EXPECT_TL naming the transport (ud_verbs, srd).

#include <nixl/backends/ucx.hpp>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backend_sides.hpp"
#include "nixl_test/catch.hpp"
#include "ucx_support.hpp"

using nixl::status;
using nixl::xfer_op;
using backend = nixl::ucx::backend;
using ucx_test::bd;
using ucx_test::peer_link;
using ucx_test::reversed_blocks;
using ucx_test::side;

namespace {

/// The transports of the lanes in UCX's description of an endpoint: ucp_ep_print_info writes
/// one line per lane, "lane[0]:  1:srd/rdmap0:1.0 md[1] ...", the transport before the '/'.
std::vector<std::string> lane_transports(const std::string& info) {
  std::vector<std::string> out;
  std::istringstream in(info);
  for (std::string l; std::getline(in, l);) {
    const auto lane = l.find("lane[");
    if (lane == std::string::npos) continue;
    const auto slash = l.find('/', lane);
    if (slash == std::string::npos) continue;
    const auto start = l.find_last_of(": ", slash);
    if (start == std::string::npos || start < lane) continue;
    out.push_back(l.substr(start + 1, slash - start - 1));
  }
  return out;
}

status run(backend& be, backend::request& r, nixl::notif_arg n = {}) {
  status s = be.post(r, n);
  if (s != status::in_progress) return s;
  return ucx_test::wait_done([&] { return be.check(r); });
}

status wait_notifs(backend& be, nixl::notif_map& m, const std::string& from, std::size_t n) {
  return ucx_test::wait_done([&] {
    be.take_notifications(m);
    return m[from].size() < n ? status::in_progress : status::success;
  });
}

}  // namespace

TEST_CASE("ucx over a verbs transport: every lane on it; put, get, notifications", "[.][ibmock]") {
  const char* want = std::getenv("NIXL_UCX_EXPECT_TL");
  if (want == nullptr || *want == '\0') {
    WARN("NIXL_UCX_EXPECT_TL unset: run through tests/backends/ucx/ibmock.sh");
    return;
  }
  constexpr std::size_t n = 64, sz = 16384, total = n * sz;
  side init("init", total), tgt("tgt", total);
  peer_link l(init, tgt, "tgt");
  peer_link back(tgt, init, "init");
  init.be.connect(l.peer);

  const std::string info = init.be.endpoint_info(l.peer);
  INFO(info);
  const auto tls = lane_transports(info);
  REQUIRE_FALSE(tls.empty());
  for (const auto& t : tls) CHECK(t == want);

  // put: descriptors in reverse order on the target, with a notification after the data
  init.buf.fill(3);
  const reversed_blocks b(init, tgt.buf.addr(), l, n, sz);
  backend::request w;
  init.be.prepare(w, xfer_op::write, b.lo, b.re, l.peer);
  CHECK(run(init.be, w, std::string_view("written")) == status::success);
  CHECK(b.written(tgt.buf, 3));
  nixl::notif_map m;
  REQUIRE(wait_notifs(tgt.be, m, "init", 1) == status::success);
  CHECK(m["init"] == std::vector<std::string>{"written"});

  // get: the target's new bytes back into the initiator
  tgt.buf.fill(5);
  backend::request rd;
  init.be.prepare(rd, xfer_op::read, b.lo, b.re, l.peer);
  CHECK(run(init.be, rd) == status::success);
  CHECK(b.read(init.buf, 5));

  // standalone notifications both ways
  init.be.notify(l.peer, "ping");
  REQUIRE(wait_notifs(tgt.be, m, "init", 2) == status::success);
  CHECK(m["init"].back() == "ping");
  tgt.be.notify(back.peer, "pong");
  nixl::notif_map m2;
  REQUIRE(wait_notifs(init.be, m2, "tgt", 1) == status::success);
  CHECK(m2["tgt"] == std::vector<std::string>{"pong"});
  const auto back_tls = lane_transports(tgt.be.endpoint_info(back.peer));
  REQUIRE_FALSE(back_tls.empty());
  for (const auto& t : back_tls) CHECK(t == want);

  CHECK(init.be.release(w) == status::success);
  CHECK(init.be.release(rd) == status::success);
}
