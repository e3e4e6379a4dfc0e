// Stall timeouts (NIXL's xferStallTimeout): a request still in progress past its timeout is
// canceled through its backend and ends with xfer_stalled. The MEMCPY test backend with
// delay_polls=-1 never completes a transfer.
#include <nixl/agent.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "nixl_test/catch.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using namespace std::chrono_literals;
using nixl::status;
using nixl::xfer_op;
using std::chrono::steady_clock;

namespace {

/// Error lines logged while a test runs (and kept off stderr).
std::atomic<int> g_stall_lines{0};
std::atomic<int> g_other_lines{0};
void capture(nixl::log::level, std::string_view msg) noexcept {
  if (msg.find("NIXL_ERR_XFER_STALLED") != std::string_view::npos)
    ++g_stall_lines;
  else
    ++g_other_lines;
}
struct log_capture {
  log_capture() {
    g_stall_lines = 0;
    g_other_lines = 0;
    nixl::log::set_sink(capture);
  }
  ~log_capture() { nixl::log::set_sink(nullptr); }
};

/// An initiator with `cfg` and a target, both with a MEMCPY backend of parameters `p`.
struct stall_rig {
  test_agent a;
  test_agent b{"target"};
  memcpy_backend* engine = nullptr;
  buffer src{256, 7}, dst{256, 0};
  explicit stall_rig(nixl::agent_config cfg, const nixl::params& p = {{"delay_polls", "-1"}})
      : a("initiator", cfg) {
    engine = &a.create_backend<memcpy_backend>(p);
    b.create_backend<memcpy_backend>(p);
    connect_pair(a, b, src, dst);
  }
  auto request(const nixl::xfer_options& opt = {}) {
    return a.create_request(xfer_op::write, src.whole(), dst.whole(), "target", opt);
  }
};

nixl::agent_config with_timeout(std::chrono::microseconds t);

/// A request posted on a rig whose agent default stall timeout is 20 ms, its error lines captured.
struct posted_request {
  log_capture logs;
  stall_rig rig{with_timeout(20ms)};
  decltype(rig.request()) r = rig.request();
  posted_request() { REQUIRE(r.post() == status::in_progress); }
};

nixl::agent_config with_timeout(std::chrono::microseconds t) {
  nixl::agent_config c;
  c.xfer_stall_timeout = t;
  return c;
}

/// Polls `r` for `span` (a deadline in time); true when every poll said in_progress.
template <class R>
bool stays_in_progress(R& r, std::chrono::milliseconds span) {
  const auto until = steady_clock::now() + span;
  while (steady_clock::now() < until) {
    if (r.status() != status::in_progress) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("XferStalledPastTimeoutIsReported") {
  log_capture logs;
  stall_rig rig(with_timeout(200ms));
  auto r = rig.request({.notif = "n"});
  const auto t0 = steady_clock::now();
  REQUIRE(r.post() == status::in_progress);
  CHECK(r.status() == status::in_progress);  // well within 200 ms of the post
  CHECK(wait(r, 10s) == status::xfer_stalled);
  CHECK(steady_clock::now() - t0 >= 200ms);
  CHECK(rig.engine->cancels() == 1);          // the backend's work was canceled, not just reported
  CHECK_FALSE(r.valid());                     // and its backend state is gone
  CHECK(r.status() == status::xfer_stalled);  // sticky
  CHECK(r.remote_agent() == "target");
  CHECK(rig.dst.bytes[0] == 0);
  CHECK(rig.b.notifications()["initiator"].empty());
  CHECK(g_stall_lines == 1);  // one error line, on the poll that found it
  CHECK(g_other_lines == 0);
}

TEST_CASE("StalledXferCannotBeReposted") {
  posted_request p;
  auto& rig = p.rig;
  auto& r = p.r;
  REQUIRE(wait(r, 10s) == status::xfer_stalled);
  CHECK(r.post() == status::xfer_stalled);  // make a new request instead
  CHECK(r.post(std::string_view("again")) == status::xfer_stalled);
  CHECK(r.status() == status::xfer_stalled);
  CHECK(rig.engine->cancels() == 1);
  CHECK(r.release() == status::success);
  CHECK(r.post() == status::invalid_param);  // released, as any request
  CHECK(r.status() == status::invalid_param);
  CHECK(r.remote_agent().empty());
  // A new request on the same peer is an ordinary one (here with a long timeout of its own).
  auto again = rig.request({.stall_timeout = 60s});
  CHECK(again.post() == status::in_progress);
  CHECK(again.status() == status::in_progress);
}

TEST_CASE("XferWithinTimeoutStaysInProgress") {
  log_capture logs;
  stall_rig rig(with_timeout(60s));
  auto r = rig.request();
  REQUIRE(r.post() == status::in_progress);
  CHECK(stays_in_progress(r, 100ms));
  CHECK(rig.engine->cancels() == 0);
  CHECK(r.post() == status::repost_active);  // a refused repost
  CHECK(r.release() == status::success);
  CHECK(rig.engine->cancels() == 1);
  CHECK(g_stall_lines == 0);
}

TEST_CASE("XferStallTimeoutDisabledByDefault") {
  log_capture logs;
  CHECK(nixl::agent_config{}.xfer_stall_timeout.count() == 0);
  CHECK(nixl::xfer_options{}.stall_timeout.count() == 0);
  stall_rig rig({});
  auto r = rig.request();
  REQUIRE(r.post() == status::in_progress);
  CHECK(stays_in_progress(r, 100ms));
  CHECK(rig.engine->cancels() == 0);
  // A timeout <= 0 is off as well.
  stall_rig neg(with_timeout(-5ms));
  auto n = neg.request();
  REQUIRE(n.post() == status::in_progress);
  CHECK(stays_in_progress(n, 50ms));
  CHECK(g_stall_lines == 0);
}

TEST_CASE("CompletedXferIsNotReportedStalled") {
  log_capture logs;
  SECTION("completed inline by the post") {
    stall_rig rig(with_timeout(10ms), {{"delay_polls", "0"}});
    auto r = rig.request();
    REQUIRE(r.post() == status::success);
    std::this_thread::sleep_for(30ms);
    CHECK(r.status() == status::success);
    CHECK(rig.dst.bytes == rig.src.bytes);
  }
  SECTION("the backend reports completion on a poll past the timeout") {
    stall_rig rig(with_timeout(10ms), {{"delay_polls", "1"}});
    auto r = rig.request();
    REQUIRE(r.post() == status::in_progress);
    std::this_thread::sleep_for(30ms);
    CHECK(r.status() == status::success);  // the backend's answer comes first
    CHECK(rig.engine->cancels() == 0);
    CHECK(rig.dst.bytes == rig.src.bytes);
    std::this_thread::sleep_for(30ms);
    CHECK(r.status() == status::success);  // never reclassified
  }
  CHECK(g_stall_lines == 0);
}

TEST_CASE("a request's stall timeout overrides the agent's") {
  log_capture logs;
  SECTION("shorter than the agent's") {
    stall_rig rig(with_timeout(60s));
    auto r = rig.request({.stall_timeout = 20ms});
    REQUIRE(r.post() == status::in_progress);
    CHECK(wait(r, 10s) == status::xfer_stalled);
    CHECK(rig.engine->cancels() == 1);
  }
  SECTION("set where the agent has none") {
    stall_rig rig({});
    auto r = rig.request({.stall_timeout = 20ms});
    REQUIRE(r.post() == status::in_progress);
    CHECK(wait(r, 10s) == status::xfer_stalled);
  }
  SECTION("turned off for one request") {
    stall_rig rig(with_timeout(10ms));
    auto r = rig.request({.stall_timeout = -1us});
    REQUIRE(r.post() == status::in_progress);
    CHECK(stays_in_progress(r, 60ms));
    CHECK(rig.engine->cancels() == 0);
  }
  SECTION("a typed request made from prepared lists") {
    stall_rig rig({});
    auto l = rig.a.prepare_list("", rig.src.whole());
    auto t = rig.a.prepare_list("target", rig.dst.whole());
    const int idx[] = {0};
    auto r = rig.a.make_request(xfer_op::write, l, idx, t, idx, {.stall_timeout = 20ms});
    REQUIRE(r.post() == status::in_progress);
    CHECK(wait(r, 10s) == status::xfer_stalled);
    CHECK(rig.engine->cancels() == 1);
  }
}

TEST_CASE("a stalled request is reported only once its backend has let go") {
  log_capture logs;
  stall_rig rig(with_timeout(10ms), {{"delay_polls", "-1"}, {"cancel_refusals", "2"}});
  auto r = rig.request();
  REQUIRE(r.post() == status::in_progress);
  std::this_thread::sleep_for(20ms);
  CHECK(r.status() == status::in_progress);  // release refused: something still runs
  CHECK(r.post() == status::repost_active);  // the cancel is under way
  CHECK(r.status() == status::in_progress);
  CHECK(rig.engine->cancels() == 0);
  CHECK(r.status() == status::xfer_stalled);
  CHECK(rig.engine->release_calls() == 3);
  CHECK(rig.engine->cancels() == 1);
  CHECK(g_stall_lines == 1);
}

TEST_CASE("a stall timeout survives a move of the request") {
  posted_request p;
  auto moved = std::move(p.r);
  CHECK(wait(moved, 10s) == status::xfer_stalled);
}
