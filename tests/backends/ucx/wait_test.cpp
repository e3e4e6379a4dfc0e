// Waiting without polling over UCX: request::wait, the agent's event fd on a completion and on
// a notification, and waits that end at their deadline when nothing happens.

#include <poll.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include "nixl_test/agent_waits.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/env.hpp"
#include "ucx_support.hpp"

using namespace nixl::test::agent_names;
using namespace std::chrono_literals;
using ucx_test::buffer;
using ucx_agent = nixl::agent<nixl::ucx::backend>;
using clk = std::chrono::steady_clock;

namespace {

// A wait may end late by a few time slices on a busy 2-core machine.
constexpr auto slack = 500ms;

// Waits (poll(2), deadline in time) until `fd` is readable; true when it is.
bool readable_within(int fd, std::chrono::milliseconds limit) {
  const auto deadline = clk::now() + limit;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clk::now());
    const int n = ::poll(&p, 1, static_cast<int>(std::max<long>(0, left.count())));
    if (n == 1 && (p.revents & POLLIN) != 0) return true;
    if (clk::now() >= deadline) return false;
  }
}

struct wait_pair {
  buffer ib, tb;
  ucx_agent init, tgt;
  /// `thread`: the initiator's progress thread; `target_thread`: the target's; `spin`: the
  /// initiator's agent_config::wait_spin.
  wait_pair(std::size_t n, bool thread, bool target_thread = true,
            std::chrono::microseconds spin = nixl::agent_config{}.wait_spin)
      : ib(n),
        tb(n),
        init("initiator", {.enable_prog_thread = thread, .wait_spin = spin}),
        // By default the target progresses itself, as a peer process does: without that, UCX
        // builds whose protocols need the target's worker (1.13's) never finish a request.
        tgt("target", {.enable_prog_thread = target_thread}) {
    init.create_backend<nixl::ucx::backend>();
    tgt.create_backend<nixl::ucx::backend>();
    init.register_memory(nixl::reg_list<nixl::dram_t>{{{ib.addr(), ib.size(), 0}, ""}});
    tgt.register_memory(nixl::reg_list<nixl::dram_t>{{{tb.addr(), tb.size(), 0}, ""}});
    init.load_remote_metadata(tgt.local_metadata());
    tgt.load_remote_metadata(init.local_metadata());
  }
};

}  // namespace

TEST_CASE("ucx wait: request::wait ends with the transfer, progress thread or not") {
  const bool thread = GENERATE(true, false);
  CAPTURE(thread);
  wait_pair p(std::size_t{8} << 20, thread);
  CHECK(p.init.get_backend<nixl::ucx::backend>().wakes_waiters() == thread);
  const std::size_t count = GENERATE(std::size_t{1}, std::size_t{512});
  const std::size_t size = (std::size_t{8} << 20) / count;
  p.ib.fill(static_cast<unsigned>(count));
  auto r = p.init.create_request(xfer_op::write, nixl::test::blocks(p.ib.addr(), count, size),
                                 nixl::test::blocks(p.tb.addr(), count, size), "target",
                                 {.notif = "waited"});
  CHECK(r.wait(1ms) == status::not_posted);
  for (int round = 0; round < 3; ++round) {
    const status s = r.post();
    REQUIRE((s == status::success || s == status::in_progress));
    const auto t0 = clk::now();
    REQUIRE(r.wait(30s) == status::success);
    CHECK(clk::now() - t0 < 30s);
    CHECK(p.tb.holds(static_cast<unsigned>(count)));
  }
  nixl::notif_map got;
  const auto deadline = clk::now() + 30s;
  while (got["initiator"].size() < 3 && clk::now() < deadline) p.tgt.wait_notifications(got, 1s);
  CHECK(got["initiator"] == std::vector<std::string>(3, "waited"));
}

TEST_CASE("ucx wait: the event fd turns readable on a completion and on a notification") {
  wait_pair p(1 << 20, true);
  const int ifd = p.init.event_fd();
  const int tfd = p.tgt.event_fd();
  REQUIRE(ifd >= 0);
  REQUIRE(tfd >= 0);
  REQUIRE(ifd != tfd);  // one per agent
  p.init.drain_events();
  p.tgt.drain_events();
  p.ib.fill(3);
  auto r =
      p.init.create_request(xfer_op::write, nixl::test::blocks(p.ib.addr(), 1, 1 << 20),
                            nixl::test::blocks(p.tb.addr(), 1, 1 << 20), "target", {.notif = "fd"});
  const status s = r.post();
  REQUIRE((s == status::success || s == status::in_progress));
  // the completion signals the initiator's fd (inline or from the progress thread)
  CHECK(readable_within(ifd, 30s));
  p.init.drain_events();
  const auto t0 = clk::now();
  CHECK(r.wait(30s) == status::success);
  CHECK(clk::now() - t0 < 30s);
  // the notification signals the target's fd, after the data
  REQUIRE(readable_within(tfd, 30s));
  p.tgt.drain_events();
  auto m = p.tgt.notifications();
  if (m["initiator"].empty()) {  // drained before the inbox was read: it is there by now
    REQUIRE(p.tgt.wait_notifications(m, 30s));
  }
  CHECK(m["initiator"] == std::vector<std::string>{"fd"});
  CHECK(p.tb.holds(3));
  // a standalone notification signals it too
  p.init.notify("target", "standalone");
  CHECK(readable_within(tfd, 30s));
  p.tgt.drain_events();
  nixl::notif_map m2;
  REQUIRE(p.tgt.wait_notifications(m2, 30s));
  CHECK(m2["initiator"] == std::vector<std::string>{"standalone"});
}

TEST_CASE("ucx wait: waits end at their deadline when nothing happens") {
  const bool thread = GENERATE(true, false);
  CAPTURE(thread);
  wait_pair p(4096, thread, thread);
  nixl::notif_map m;
  for (auto timeout : {0ms, 30ms, 200ms}) {
    const auto t0 = clk::now();
    CHECK_FALSE(p.tgt.wait_notifications(m, timeout));
    const auto took = clk::now() - t0;
    CHECK(took >= timeout);
    CHECK(took < timeout + slack);
  }
  CHECK(m.empty());
  // nothing comes through the fd either
  const int fd = p.tgt.event_fd();
  p.tgt.drain_events();
  pollfd pf{fd, POLLIN, 0};
  CHECK(::poll(&pf, 1, 50) == 0);
}

TEST_CASE("ucx wait: the first wait after a post polls for wait_spin, then sleeps") {
  // Over tcp a put needs the target's worker (the data and the flush's answer): a target that
  // nobody progresses holds the request in flight while the initiator waits.
  nixl::test::env_guard env;
  env.set("UCX_TLS", "tcp");
  const auto spin = GENERATE(0ms, 20ms);
  // up to request::wait_spin_max_bytes a wait spins; beyond, it sleeps at once
  const std::size_t n = GENERATE(std::size_t{64} << 10, std::size_t{16} << 20);
  CAPTURE(spin.count(), n);
  const bool spins =
      spin.count() > 0 && n <= nixl::request<nixl::ucx::backend>::wait_spin_max_bytes;
  wait_pair p(n, true, false, spin);
  auto& be = p.init.get_backend<nixl::ucx::backend>();
  auto r = p.init.create_request(xfer_op::write, nixl::test::blocks(p.ib.addr(), 1, n),
                                 nixl::test::blocks(p.tb.addr(), 1, n), "target");
  REQUIRE(r.post() == status::in_progress);
  const std::uint32_t before = be.worker_polls(0);
  auto t0 = clk::now();
  CHECK(r.wait(100ms) == status::in_progress);
  CHECK(clk::now() - t0 >= 100ms);  // the spin did not end the wait before its deadline
  const std::uint32_t after_first = be.worker_polls(0);
  if (spins)
    CHECK(after_first != before);  // polled the request (each poll progresses its worker)
  else
    CHECK(after_first == before);  // slept at once: never progressed the worker
  // a second wait on the same post sleeps at once
  t0 = clk::now();
  CHECK(r.wait(50ms) == status::in_progress);
  CHECK(clk::now() - t0 >= 50ms);
  CHECK(be.worker_polls(0) == after_first);
  // the target moves now: the wait that sleeps ends with the transfer
  std::atomic<bool> stop{false};
  std::thread driver([&] {
    while (!stop.load()) p.tgt.get_backend<nixl::ucx::backend>().progress();
  });
  CHECK(r.wait(30s) == status::success);
  stop = true;
  driver.join();
  // wait(0) polls once: the spin is bounded by the wait's own deadline
  REQUIRE(r.post() == status::in_progress);
  t0 = clk::now();
  CHECK(r.wait(0ms) == status::in_progress);
  CHECK(clk::now() - t0 < slack);
  CHECK(r.release() == status::success);
}

TEST_CASE("ucx wait: many requests in flight, looked at with peek after each fd wake-up") {
  // As above: over tcp, with nobody progressing the target, the puts stay in flight.
  nixl::test::env_guard env;
  env.set("UCX_TLS", "tcp");
  constexpr std::size_t count = 16, size = std::size_t{64} << 10;
  wait_pair p(count * size, true, false);
  auto& be = p.init.get_backend<nixl::ucx::backend>();
  p.ib.fill(9);
  std::vector<ucx_agent::xfer_request> reqs;
  for (std::size_t i = 0; i < count; ++i)
    reqs.push_back(
        p.init.create_request(xfer_op::write, nixl::test::blocks(p.ib.addr(i * size), 1, size),
                              nixl::test::blocks(p.tb.addr(i * size), 1, size), "target"));
  CHECK(reqs[0].peek() == status::not_posted);
  for (auto& r : reqs) REQUIRE(r.post() == status::in_progress);
  // peek reads the completion records alone: the initiator's worker is not progressed
  const std::uint32_t before = be.worker_polls(0);
  for (int round = 0; round < 100; ++round)
    for (auto& r : reqs) REQUIRE(r.peek() == status::in_progress);
  CHECK(be.worker_polls(0) == before);
  // the target moves: the progress thread ends the requests and signals the fd
  std::atomic<bool> stop{false};
  std::thread driver([&] {
    while (!stop.load()) p.tgt.get_backend<nixl::ucx::backend>().progress();
  });
  const int fd = p.init.event_fd();
  std::size_t ended = 0;
  std::vector<bool> done(count, false);
  const auto deadline = clk::now() + 30s;
  while (ended < count && clk::now() < deadline) {
    p.init.drain_events();
    bool any = false;
    for (std::size_t i = 0; i < count; ++i) {
      if (done[i]) continue;
      const status s = reqs[i].peek();
      if (s == status::in_progress) continue;
      CHECK(s == status::success);
      done[i] = any = true;
      ++ended;
    }
    if (!any && ended < count) {
      pollfd pf{fd, POLLIN, 0};
      ::poll(&pf, 1, 100);
    }
  }
  stop = true;
  driver.join();
  CHECK(ended == count);
  CHECK(p.tb.holds(9));
  for (auto& r : reqs) {
    CHECK(r.peek() == status::success);  // terminal, as status() is
    CHECK(r.release() == status::success);
    CHECK(r.peek() == status::invalid_param);
  }
}

TEST_CASE("ucx abort notices: a request released in flight tells its target, once its data is in") {
  // Over tcp a put needs the target's worker: a target without a progress thread that is not
  // progressed holds the request in flight for as long as this test wants.
  nixl::test::env_guard env;
  env.set("UCX_TLS", "tcp");
  constexpr std::size_t n = std::size_t{16} << 20;
  wait_pair p(n, true, false);
  p.ib.fill(11);
  auto r =
      p.init.create_request(xfer_op::write, nixl::test::blocks(p.ib.addr(), 1, n),
                            nixl::test::blocks(p.tb.addr(), 1, n), "target", {.notif = "kv-3"});
  const status s = r.post();
  REQUIRE((s == status::in_progress || s == status::success));
  // 16 MiB do not fit the sockets' buffers: the request cannot end before the target moves
  REQUIRE(s == status::in_progress);
  REQUIRE(r.status() == status::in_progress);
  CHECK(r.release() == status::success);
  // Waiting progresses the target: the data lands, the initiator's flush ends, and the notice
  // arrives (never the notification).
  nixl::notif_map notifs, aborts;
  const auto until = clk::now() + 20s;
  while (aborts.empty() && notifs.empty() && clk::now() < until)
    p.tgt.wait_notifications(notifs, aborts, until - clk::now());
  REQUIRE(aborts.size() == 1);
  CHECK(aborts["initiator"] == std::vector<std::string>{"kv-3"});
  CHECK(notifs.empty());
  // A request that completes sends its notification and no notice.
  auto ok =
      p.init.create_request(xfer_op::write, nixl::test::blocks(p.ib.addr(), 1, 4096),
                            nixl::test::blocks(p.tb.addr(), 1, 4096), "target", {.notif = "kv-4"});
  (void)ok.post();
  nixl::notif_map more, no_aborts;
  const auto until2 = clk::now() + 20s;
  while (more.empty() && clk::now() < until2)
    p.tgt.wait_notifications(more, no_aborts, until2 - clk::now());
  REQUIRE(ok.wait(20s) == status::success);
  CHECK(more["initiator"] == std::vector<std::string>{"kv-4"});
  CHECK(p.tgt.aborted_notifications().empty());
  CHECK(no_aborts.empty());
}
