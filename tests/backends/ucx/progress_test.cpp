// The UCX progress thread's wake-ups and the worker structure: a request posted while the thread
// sleeps long must still complete without the application polling; a worker an application
// thread polled and then abandoned must be taken back; num_threads, worker_id= and
// split_batch_size place requests on the workers they name; post_thread hands the posts it names
// to the thread.

#include <nixl/backends/ucx.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend_sides.hpp"
#include "nixl_test/catch.hpp"
#include "ucx_support.hpp"

using namespace ucx_test::backend_names;
using namespace std::chrono_literals;
using ucx_test::run_mode;

namespace {

// Waits for the next notification of `from` at `to` (its progress thread delivers it; taking
// notifications does not progress a backend that has one). Returns how long it took.
std::chrono::milliseconds notif_delay(side& to, const std::string& from, std::size_t count,
                                      nixl::notif_map& m) {
  const auto t0 = std::chrono::steady_clock::now();
  ucx_test::wait_done([&] {
    to.be.take_notifications(m);
    if (m[from].size() >= count) return status::success;
    std::this_thread::sleep_for(200us);
    return status::in_progress;
  });
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0);
}

}  // namespace

TEST_CASE(
    "ucx progress thread: a post wakes a thread in a long sleep; an abandoned worker is "
    "taken back") {
  // Idle sleeps double up to 5 s: after 3 s of idleness the thread is in a sleep of about 2 s,
  // so a post that did not wake it would wait that long. 8 MiB needs many progress steps (UCX
  // 1.13 moves it in fragments that both sides handle; 1.22 copies it in the progress call).
  constexpr std::size_t n = std::size_t{8} << 20;
  const run_mode slow_idle{true, nixl::thread_sync::rw, 5s};
  side init("init", n, {}, slow_idle), tgt("tgt", n, {}, slow_idle);
  peer_link l(init, tgt, "tgt");
  std::vector<nixl::bound_desc<backend::region>> lo{bd(init.buf.addr(), n, init.reg)};
  std::vector<nixl::bound_desc<backend::remote_region>> re{bd(tgt.buf.addr(), n, l.rr)};
  backend::request w;
  init.be.prepare(w, xfer_op::write, lo, re, l.peer);
  nixl::notif_map m;

  // parked, then woken by the post: the application never polls the request before its
  // notification (sent once the data is at the target) arrives
  std::this_thread::sleep_for(3s);
  init.buf.fill(3);
  status s = init.be.post(w, std::string_view("parked"));
  REQUIRE((s == status::in_progress || s == status::success));
  const auto woken = notif_delay(tgt, "init", 1, m);
  CHECK(woken < 1000ms);
  REQUIRE(m["init"].size() == 1);
  CHECK(tgt.buf.holds(3, 0, n, 0));
  CHECK(ucx_test::wait_done([&] { return init.be.check(w); }) == status::success);

  // driven, then abandoned: the application polls the worker for a while (the thread leaves
  // it alone), then posts and stops polling; the thread must take the worker back
  const auto until = std::chrono::steady_clock::now() + 50ms;
  while (std::chrono::steady_clock::now() < until) init.be.progress();
  init.buf.fill(4);
  s = init.be.post(w, std::string_view("abandoned"));
  REQUIRE((s == status::in_progress || s == status::success));
  const auto taken = notif_delay(tgt, "init", 2, m);
  CHECK(taken < 1000ms);
  REQUIRE(m["init"].size() == 2);
  CHECK(m["init"][1] == "abandoned");
  CHECK(tgt.buf.holds(4, 0, n, 0));
  CHECK(ucx_test::wait_done([&] { return init.be.check(w); }) == status::success);
  CHECK(init.be.release(w) == status::success);
}

TEST_CASE("ucx num_threads: one worker per posting thread") {
  side a("threads", 1 << 16, {{"num_threads", "3"}}, run_mode{true, nixl::thread_sync::rw});
  CHECK(a.be.configuration().num_workers == 3);
  auto self = a.be.self_peer();
  auto rr = a.be.load_local(a.reg);
  std::vector<nixl::bound_desc<backend::region>> lo{bd(a.buf.addr(), 64, a.reg)};
  std::vector<nixl::bound_desc<backend::remote_region>> re{bd(a.buf.addr() + 4096, 64, rr)};
  // each thread's requests stay on its worker; three threads alive at once get three workers,
  // and so do the next three (threads started anew for each phase of a program)
  for (int phase = 0; phase < 3; ++phase) {
    std::vector<std::uint32_t> first(3), second(3);
    std::atomic<int> arrived{0}, done{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; ++t)
      ts.emplace_back([&, t] {
        arrived.fetch_add(1);
        while (arrived.load() < 3) std::this_thread::yield();
        backend::request r1, r2;
        a.be.prepare(r1, xfer_op::write, lo, re, self);
        a.be.prepare(r2, xfer_op::write, lo, re, self);
        first[t] = r1.worker();
        second[t] = r2.worker();
        a.be.release(r1);
        a.be.release(r2);
        done.fetch_add(1);
        while (done.load() < 3) std::this_thread::yield();  // all alive until all have prepared
      });
    for (auto& t : ts) t.join();
    CHECK(first == second);
    CHECK(std::set<std::uint32_t>(first.begin(), first.end()).size() == 3);
  }
  CHECK(code_of([] {
          backend::config::from_params({{"num_threads", "x"}});
        }) == status::invalid_param);
  a.be.unload_region(rr);
}

TEST_CASE("ucx worker_id= picks the worker; split_batch_size spreads chunks over workers") {
  side init("init", 1 << 20, {{"num_workers", "3"}, {"split_batch_size", "4"}});
  side tgt("tgt", 1 << 20, {{"num_workers", "2"}});
  peer_link l(init, tgt, "tgt");
  constexpr std::size_t n = 10, sz = 4096;
  const reversed_blocks b(init, tgt.buf.addr(), l, n, sz, sz);
  const auto& lo = b.lo;
  const auto& re = b.re;
  // worker_id: among other custom items, on any request
  backend::request one;
  init.be.prepare(one, xfer_op::write, std::span(lo).first(1), std::span(re).first(1), l.peer,
                  "foo=1, worker_id=2");
  CHECK(one.worker() == 2);
  CHECK(one.chunks() == 1);
  CHECK(code_of([&] {
          init.be.prepare(one, xfer_op::write, std::span(lo).first(1), std::span(re).first(1),
                          l.peer, "worker_id=3");
        }) == status::invalid_param);
  CHECK(init.be.release(one) == status::success);

  // 10 descriptors in chunks of 4: 3 chunks, starting at worker 1
  backend::request w;
  init.be.prepare(w, xfer_op::write, lo, re, l.peer, "worker_id=1");
  CHECK(w.size() == n);
  CHECK(w.chunks() == 3);
  for (int round = 0; round < 3; ++round) {
    init.buf.fill(static_cast<unsigned>(20 + round));
    status s = init.be.post(w, std::string_view("split"));
    if (s == status::in_progress) s = ucx_test::wait_done([&] { return init.be.check(w); });
    REQUIRE(s == status::success);
    CHECK(b.written(tgt.buf, static_cast<unsigned>(20 + round)));
  }
  // one notification per post, after all chunks
  nixl::notif_map m;
  notif_delay(tgt, "init", 3, m);
  CHECK(m["init"] == std::vector<std::string>(3, "split"));
  // read back, split as well
  tgt.buf.fill(30);
  backend::request rd;
  init.be.prepare(rd, xfer_op::read, lo, re, l.peer);
  CHECK(rd.chunks() == 3);
  status s = init.be.post(rd, {});
  if (s == status::in_progress) s = ucx_test::wait_done([&] { return init.be.check(rd); });
  CHECK(s == status::success);
  CHECK(b.read(init.buf, 30));
  CHECK(init.be.release(w) == status::success);
  CHECK(init.be.release(rd) == status::success);
}

// shm_min_size sends another process's large same-host blocks through UCX's shared-memory
// protocol, which the peer's worker must progress; an agent of this process may have no
// progress thread and be progressed by no one while this one polls its request, so its blocks
// stay in cma calls at every size.
TEST_CASE("ucx one process: large blocks to an agent of this process stay in cma calls") {
  constexpr std::size_t blk = 64 * 1024, n = 16;
  side init("init", n * blk, {{"shm_min_size", "4096"}}), tgt("tgt", n * blk, {}, false);
  peer_link l(init, tgt, "tgt");
  const reversed_blocks b(init, tgt.buf.addr(), l, n, blk);
  backend::request w;
  init.be.prepare(w, xfer_op::write, b.lo, b.re, l.peer);
  // the endpoint query that finds UCX's cma lane came with UCX 1.14
  const bool cma = UCP_API_VERSION >= UCP_VERSION(1, 14);
  CHECK(w.cma_copies() == cma);
  CHECK(w.chunks() == 1);
  init.buf.fill(5);
  tgt.buf.fill(0);
  REQUIRE(init.be.post(w, std::nullopt) != status::invalid_param);
  // only this side is polled (the target has no progress thread), except before UCX 1.14,
  // which emulates a same-host put with the target's worker
  CHECK(ucx_test::wait_done([&] {
          if (!cma) tgt.be.progress();
          return init.be.check(w);
        }) == status::success);
  CHECK(b.written(tgt.buf, 5));
  CHECK(init.be.release(w) == status::success);
}

TEST_CASE("ucx post_thread: which requests the progress thread posts, and what it does with them") {
  constexpr std::size_t blk = 4096, n = 64;
  SECTION("auto: many operations go to the thread, one small one does not; never, always") {
    for (const char* mode : {"auto", "never", "always"}) {
      // UCX's puts (host_dram_copy=ucx): the backend's own cma calls go to the thread at any count
      side init("init", n * blk, {{"post_thread", mode}, {"host_dram_copy", "ucx"}}),
          tgt("tgt", n * blk);
      peer_link l(init, tgt, "tgt");
      const reversed_blocks b(init, tgt.buf.addr(), l, n, blk);
      const auto& lo = b.lo;
      const auto& re = b.re;
      backend::request many, one;
      init.be.prepare(many, xfer_op::write, lo, re, l.peer);
      init.be.prepare(one, xfer_op::write, std::span(lo).first(1), std::span(re).first(1), l.peer);
      const std::string m = mode;
      CHECK(many.posted_on_thread() == (m != "never"));
      CHECK(one.posted_on_thread() == (m == "always"));
      // The request is never polled: the thread posts it, and the notification (sent once
      // the data is at the target) arrives.
      init.buf.fill(7);
      const status s = init.be.post(many, std::string_view("many"));
      REQUIRE((s == status::in_progress || s == status::success));
      nixl::notif_map got;
      CHECK(nixl::test::wait_until([&] {
        tgt.be.take_notifications(got);
        return !got["init"].empty();
      }));
      CHECK(got["init"] == std::vector<std::string>{"many"});
      CHECK(b.written(tgt.buf, 7));
      CHECK(ucx_test::wait_done([&] { return init.be.check(many); }) == status::success);
      // A read posted by the thread and polled at once (the poll may post it itself).
      backend::request rd;
      init.be.prepare(rd, xfer_op::read, lo, re, l.peer);
      tgt.buf.fill(9);
      REQUIRE(init.be.post(rd, std::nullopt) != status::invalid_param);
      CHECK(ucx_test::wait_done([&] { return init.be.check(rd); }) == status::success);
      CHECK(b.read(init.buf, 9));
      CHECK(init.be.release(many) == status::success);
      CHECK(init.be.release(one) == status::success);
      CHECK(init.be.release(rd) == status::success);
    }
    CHECK(code_of([] {
            backend::config::from_params({{"post_thread", "sometimes"}});
          }) == status::invalid_param);
    CHECK(backend::config::from_params({{"post_thread", "ALWAYS"}}).post_thread ==
          nixl::ucx::post_thread_mode::always);
  }
  SECTION("a post released before the thread made it is canceled: nothing lands afterwards") {
    side init("init", n * blk, {{"post_thread", "always"}}), tgt("tgt", n * blk);
    peer_link l(init, tgt, "tgt");
    std::vector<nixl::bound_desc<backend::region>> lo{bd(init.buf.addr(), n * blk, init.reg)};
    std::vector<nixl::bound_desc<backend::remote_region>> re{bd(tgt.buf.addr(), n * blk, l.rr)};
    for (int round = 0; round < 20; ++round) {
      // Even rounds: the thread holds its queue, so the release finds the post still queued and
      // cancels it. Odd rounds: the thread and the release race; either outcome is whole.
      const bool held = round % 2 == 0;
      CAPTURE(round, held);
      init.be.hold_thread_posts(held);
      backend::request w;
      init.be.prepare(w, xfer_op::write, lo, re, l.peer);
      REQUIRE(w.posted_on_thread());
      tgt.buf.fill(0);
      init.buf.fill(static_cast<unsigned>(30 + round));
      const std::string tag = "r" + std::to_string(round);
      const status s = init.be.post(w, std::string_view(tag));
      REQUIRE((s == status::in_progress || s == status::success));
      CHECK(init.be.release(w) == status::success);
      const bool landed = tgt.buf.holds(static_cast<unsigned>(30 + round), 0, n * blk, 0);
      const bool untouched = tgt.buf.holds(0, 0, n * blk, 0);
      CHECK((landed || untouched));  // never a part of the request
      if (held) CHECK(untouched);
      // the target learns the end either way: the notification, or an abort notice
      nixl::notif_map nr, ar;
      CHECK(nixl::test::wait_until([&] {
        tgt.be.take_notifications(nr);
        tgt.be.take_aborts(ar);
        return nr["init"].size() + ar["init"].size() == 1;
      }));
      if (held || !ar["init"].empty()) {
        // canceled before the thread posted it, or (a slow machine) abandoned after its grace
        CHECK(ar["init"] == std::vector<std::string>{tag});
        CHECK(nr["init"].empty());
      } else {
        CHECK(nr["init"] == std::vector<std::string>{tag});
        CHECK(landed);
      }
      // nothing of it arrives later
      std::this_thread::sleep_for(5ms);
      CHECK(tgt.buf.holds(landed ? static_cast<unsigned>(30 + round) : 0, 0, n * blk, 0));
    }
    init.be.hold_thread_posts(false);
  }
  SECTION("over a TCP lane every request goes to the thread") {
    constexpr std::size_t big = std::size_t{1} << 20;
    const nixl::params tcp{{"engine_config", "TLS=tcp,NET_DEVICES=lo"}};
    side init("init", big, tcp), tgt("tgt", big, tcp);
    peer_link l(init, tgt, "tgt");
    std::vector<nixl::bound_desc<backend::region>> lo{bd(init.buf.addr(), big, init.reg)};
    std::vector<nixl::bound_desc<backend::remote_region>> re{bd(tgt.buf.addr(), big, l.rr)};
    backend::request large, small;
    init.be.prepare(large, xfer_op::write, lo, re, l.peer);
    std::vector<nixl::bound_desc<backend::region>> slo{bd(init.buf.addr(), 4096, init.reg)};
    std::vector<nixl::bound_desc<backend::remote_region>> sre{bd(tgt.buf.addr(), 4096, l.rr)};
    init.be.prepare(small, xfer_op::write, slo, sre, l.peer);
#if UCP_API_VERSION >= UCP_VERSION(1, 14)
    CHECK(large.posted_on_thread());  // UCX says which transports an endpoint uses
    CHECK(small.posted_on_thread());
#endif
    init.buf.fill(5);
    REQUIRE(init.be.post(large, std::nullopt) != status::invalid_param);
    CHECK(ucx_test::wait_done([&] { return init.be.check(large); }) == status::success);
    CHECK(tgt.buf.holds(5, 0, big, 0));
    init.buf.fill(8);
    REQUIRE(init.be.post(small, std::nullopt) != status::invalid_param);
    CHECK(ucx_test::wait_done([&] { return init.be.check(small); }) == status::success);
    CHECK(tgt.buf.holds(8, 0, 4096, 0));
    CHECK(init.be.release(large) == status::success);
    CHECK(init.be.release(small) == status::success);
  }
}
