// The agent's waker (detail/waker.hpp): notify, drain, waits that end on time; and
// request::wait / agent::wait_notifications over a backend that is only polled; the poll watch
// of the progress threads (detail/poll_watch.hpp).

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <nixl/agent.hpp>
#include <nixl/detail/poll_watch.hpp>
#include <nixl/detail/waker.hpp>

#include "nixl_test/catch.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::xfer_op;
using nixl::detail::waker;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

// Slack for a deadline on a busy 2-core machine: a wait may end late by a time slice or two.
constexpr auto slack = 500ms;

}  // namespace

TEST_CASE("waker: notify writes only while someone may wait; drain empties", "[waker]") {
  waker w;
  REQUIRE(w.fd() >= 0);
  w.notify();  // nobody armed: no write
  CHECK_FALSE(readable(w.fd()));
  const int fd = w.share();  // an event loop holds the fd: armed for good
  CHECK(fd == w.fd());
  CHECK(w.shared());
  CHECK(w.armed() == 1);
  w.notify();
  CHECK(readable(fd));
  w.notify();  // pending already: no second write needed, still one readable fd
  CHECK(readable(fd));
  w.drain();
  CHECK_FALSE(readable(fd));
  w.notify();  // drained: the next event signals again
  CHECK(readable(fd));
  w.drain();
  w.share();  // sharing twice arms once
  CHECK(w.armed() == 1);
}

TEST_CASE("waker: wait_until ends at its deadline when nothing happens", "[waker]") {
  waker w;
  for (auto timeout : {0ms, 20ms, 150ms}) {
    const auto t0 = clk::now();
    CHECK_FALSE(w.wait_for([] { return false; }, timeout));
    const auto took = clk::now() - t0;
    CHECK(took >= timeout);
    CHECK(took < timeout + slack);
  }
  CHECK(w.armed() == 0);  // a wait disarms when it leaves
  // a huge timeout saturates instead of overflowing into the past
  CHECK(waker::deadline_after(std::chrono::nanoseconds::max()) == waker::clock::time_point::max());
}

TEST_CASE("waker: a notify from another thread ends the wait early", "[waker]") {
  waker w;
  std::atomic<bool> flag{false};
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    flag.store(true, std::memory_order_release);
    w.notify();
  });
  const auto t0 = clk::now();
  CHECK(w.wait_for([&] { return flag.load(std::memory_order_acquire); }, 60s));
  CHECK(clk::now() - t0 < 30s);  // woken, not timed out
  t.join();
}

TEST_CASE("waker: many events and two waiters lose no wake-up", "[waker]") {
  waker w;
  std::atomic<int> a{0}, b{0};
  constexpr int n = 2000;
  std::thread ta([&] {
    for (int i = 1; i <= n; ++i) {
      const bool ok = w.wait_for([&] { return a.load(std::memory_order_acquire) >= i; }, 30s);
      if (!ok) return;
    }
  });
  std::thread tb([&] {
    for (int i = 1; i <= n; ++i)
      if (!w.wait_for([&] { return b.load(std::memory_order_acquire) >= i; }, 30s)) return;
  });
  const auto deadline = clk::now() + 60s;
  for (int i = 0; i < n && clk::now() < deadline; ++i) {
    a.fetch_add(1, std::memory_order_release);
    w.notify();
    b.fetch_add(1, std::memory_order_release);
    w.notify();
    if (i % 64 == 0) std::this_thread::yield();
  }
  ta.join();
  tb.join();
  CHECK(a.load() == n);
  CHECK(w.armed() == 0);
}

TEST_CASE("request::wait over a backend that is only polled", "[waker]") {
  pair_fixture<> f(nixl::params{{"delay_polls", "5"}});
  auto& a = f.a;
  auto& b = f.b;
  buffer src(4096), dst(4096);
  src.iota(7);
  f.connect(src, dst);
  auto r = a.create_request(xfer_op::write, src.whole(), dst.whole(), "target", {.notif = "w1"});
  CHECK(r.wait(10ms) == status::not_posted);  // nothing in flight: at once
  REQUIRE(r.post() == status::in_progress);
  const auto t0 = clk::now();
  CHECK(r.wait(30s) == status::success);  // re-checked at intervals until it ends
  CHECK(clk::now() - t0 < 30s);
  CHECK(dst.bytes == src.bytes);
  CHECK(r.wait(0ms) == status::success);  // ended: sticky

  nixl::notif_map got;
  CHECK(b.wait_notifications(got, 30s));
  REQUIRE(got["initiator"].size() == 1);
  CHECK(got["initiator"][0] == "w1");
  // nothing more arrives: the wait ends at its deadline with nothing appended
  const auto t1 = clk::now();
  CHECK_FALSE(b.wait_notifications(got, 50ms));
  CHECK(clk::now() - t1 >= 50ms);
  CHECK(clk::now() - t1 < 50ms + slack);
  CHECK(got["initiator"].size() == 1);
  CHECK(a.event_fd() >= 0);
}

TEST_CASE("request::wait ends at its deadline while the transfer goes on", "[waker]") {
  pair_fixture<> f(nixl::params{{"delay_polls", "1000000000"}});
  buffer src(64), dst(64);
  f.connect(src, dst);
  auto r = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  REQUIRE(r.post() == status::in_progress);
  for (auto timeout : {0ms, 40ms}) {
    const auto t0 = clk::now();
    CHECK(r.wait(timeout) == status::in_progress);
    const auto took = clk::now() - t0;
    CHECK(took >= timeout);
    CHECK(took < timeout + slack);
  }
  CHECK(r.release() == status::success);
}

TEST_CASE("poll_watch: a poll opens the window, it closes after window_ns or at hand_back") {
  using nixl::detail::poll_watch;
  using nixl::detail::poll_window;
  poll_watch w;
  poll_window t;
  const std::int64_t t0 = 1'000'000'000;  // the thread's clock, given: nothing here waits
  CHECK_FALSE(t.update(w, t0));
  CHECK_FALSE(t.changed());
  CHECK_FALSE(w.open());

  w.poll();
  CHECK(w.polls() == 1);
  CHECK(t.update(w, t0 + 10));
  CHECK(t.changed());
  CHECK(w.open());
  // No new poll: open until window_ns after the one seen, then closed.
  CHECK(t.update(w, t0 + 10 + poll_watch::window_ns - 1));
  CHECK_FALSE(t.changed());
  CHECK_FALSE(t.update(w, t0 + 10 + poll_watch::window_ns));
  CHECK(t.changed());
  CHECK_FALSE(w.open());

  // `busy` counts as a poll without one.
  CHECK(t.update(w, t0 + 5 * poll_watch::window_ns, true));
  CHECK(w.open());

  // hand_back closes it at the next pass, even right after a poll.
  w.poll();
  w.hand_back();
  CHECK_FALSE(t.update(w, t0 + 5 * poll_watch::window_ns + 1));
  CHECK(t.changed());
  CHECK_FALSE(w.open());
  // ... and only once: the next poll opens it again.
  w.poll();
  CHECK(t.update(w, t0 + 5 * poll_watch::window_ns + 2));
  CHECK(poll_watch::tick_ns < poll_watch::window_ns);
}
