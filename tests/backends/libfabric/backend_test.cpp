// nixl::libfabric::backend driven directly: parameters, wire formats refused when damaged,
// striping over rails, a bad remote key, release in flight.

#include <nixl/backends/libfabric.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lf_support.hpp"
#include "nixl_test/backend_link.hpp"

using nixl::status;
using nixl::xfer_op;
namespace lf = nixl::libfabric;
using lf_test::buffer;
using lf_test::bytes_of;
using lf_test::code_of;

namespace {

nixl::backend_context ctx(std::string name, bool thread = true) {
  return {std::move(name), nixl::thread_sync::none, thread, {}};
}

struct side {
  lf::backend be;
  buffer buf;
  lf::backend::region reg;
  side(std::string name, std::size_t n, const nixl::params& p, bool thread = true)
      : be(lf::config::from_params(p), ctx(std::move(name), thread)), buf(n) {
    reg = be.register_region(nixl::mem_kind::dram, {{buf.addr(), n, 0}, ""});
  }
  ~side() { be.deregister_region(reg); }
};

struct peer_link : nixl::test::peer_link<lf::backend> {
  peer_link(side& from, side& to, const std::string& to_name)
      : nixl::test::peer_link<lf::backend>(from, to, to_name) {}
};

using nixl::test::bd;

/// Collects `be`'s notifications and abort notices from sender `from` until `n` messages
/// arrived in all or 10 s passed: {notifications, notices}.
std::pair<std::vector<std::string>, std::vector<std::string>> messages_from(lf::backend& be,
                                                                            const std::string& from,
                                                                            std::size_t n) {
  nixl::notif_map notifs, aborts;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (notifs[from].size() + aborts[from].size() < n &&
         std::chrono::steady_clock::now() < until) {
    be.take_notifications(notifs);
    be.take_aborts(aborts);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return {notifs[from], aborts[from]};
}

}  // namespace

TEST_CASE("libfabric config: NIXL names, defaults, bad values refused") {
  const auto c = lf::config::from_params(
      {{"num_threads", "4"}, {"interfaces", "a, b"}, {"heartbeat_ms", "100"}});
  CHECK(c.num_threads == 4);
  REQUIRE(c.interfaces.size() == 2);
  CHECK(c.interfaces[1] == "b");
  CHECK(lf::config::from_params(c.to_params()).interfaces == c.interfaces);
  CHECK(code_of([] {
          lf::config::from_params({{"num_threads", "many"}});
        }) == status::invalid_param);
  CHECK(code_of([] {
          lf::config::from_params({{"heartbeat_ms", "500"}, {"peer_timeout_ms", "400"}});
        }) == status::invalid_param);
  CHECK(lf::backend::default_params().count("num_threads") == 1);
  CHECK(code_of([] {
          lf::backend b(lf::config::from_params({{"provider", "no-such-provider"}}), ctx("x"));
        }) == status::not_supported);
  CHECK(code_of([] {
          lf::backend b(
              lf::config::from_params({{"provider", "tcp;ofi_rxm"}, {"interfaces", "no-such-if0"}}),
              ctx("x"));
        }) == status::not_found);
}

TEST_CASE("libfabric backend: garbage connection info and region data are refused") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  side a("a", 1 << 16, lf_test::tcp_params()), b("b", 1 << 16, lf_test::tcp_params());
  const std::string info = b.be.connection_info();
  // every truncation and every single flipped byte
  for (std::size_t n = 0; n < info.size(); ++n) {
    CHECK(code_of([&] { a.be.load_peer("b", bytes_of(info.substr(0, n))); }) != status::success);
  }
  for (std::size_t i = 0; i < info.size(); ++i) {
    std::string bad = info;
    bad[i] = static_cast<char>(bad[i] ^ 0x41);
    CHECK(code_of([&] { a.be.load_peer("b", bytes_of(bad)); }) != status::success);
  }
  peer_link l(a, b, "b");
  const std::string pd = b.be.public_data(b.reg);
  for (std::size_t i = 0; i < pd.size(); ++i) {
    std::string bad = pd;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    CHECK(
        code_of([&] {
          a.be.unpack(l.peer, nixl::mem_kind::dram, {b.buf.addr(), b.buf.size(), 0}, bytes_of(bad));
        }) != status::success);
  }
  // region data of another range than the one the metadata names
  CHECK(code_of([&] {
          a.be.unpack(l.peer, nixl::mem_kind::dram, {b.buf.addr() + 64, b.buf.size() - 64, 0},
                      bytes_of(pd));
        }) == status::mismatch);
  // a peer of another provider
  if (lf_test::unavailable(lf_test::shm_params()).empty()) {
    side s("s", 4096, lf_test::shm_params());
    CHECK(code_of([&] { a.be.load_peer("s", bytes_of(s.be.connection_info())); }) ==
          status::mismatch);
  }
}

TEST_CASE("libfabric backend: two rails stripe a large write and spread small ones") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  const std::size_t n = std::size_t{8} << 20;
  side a("a", n, lf_test::tcp_params("lo,lo")), b("b", n, lf_test::tcp_params("lo,lo"));
  REQUIRE(a.be.rails().size() == 2);
  peer_link l(a, b, "b");
  a.buf.fill(5);
  std::vector<nixl::bound_desc<lf::backend::region>> loc{bd(a.buf.addr(), n, a.reg)};
  std::vector<nixl::bound_desc<lf::backend::remote_region>> rem{bd(b.buf.addr(), n, l.rr)};
  lf::backend::request r;
  a.be.prepare(r, xfer_op::write, loc, rem, l.peer);
  CHECK(r.rails() == 2);
  const status s = a.be.post(r, std::string_view("striped"));
  REQUIRE((s == status::success || s == status::in_progress));
  REQUIRE(lf_test::wait_done([&] { return a.be.check(r); }) == status::success);
  CHECK(b.buf.holds(5, 0, n, 0));
  nixl::notif_map m;
  lf_test::wait_done([&] {
    b.be.take_notifications(m);
    return m["a"].empty() ? status::in_progress : status::success;
  });
  REQUIRE(m["a"].size() == 1);
  CHECK(m["a"][0] == "striped");
  // at the threshold a descriptor stays on one rail; two such go to both rails
  const std::size_t t = 128 << 10;
  loc = {bd(a.buf.addr(), t, a.reg), bd(a.buf.addr() + t, t, a.reg)};
  rem = {bd(b.buf.addr(), t, l.rr), bd(b.buf.addr() + t, t, l.rr)};
  lf::backend::request r2;
  a.be.prepare(r2, xfer_op::read, loc, rem, l.peer);
  CHECK(r2.size() == 2);
  CHECK(r2.rails() == 2);
  a.be.release(r2);
  a.be.release(r);
}

TEST_CASE("libfabric backend: a wrong remote key fails the transfer, bounded") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  side a("a", 1 << 20, lf_test::tcp_params()), b("b", 1 << 20, lf_test::tcp_params());
  peer_link l(a, b, "b");
  lf::backend::remote_region bad = l.rr;
  bad.keys[0] ^= 0x5a5a5a5aull;
  std::vector<nixl::bound_desc<lf::backend::region>> loc{bd(a.buf.addr(), 4096, a.reg)};
  std::vector<nixl::bound_desc<lf::backend::remote_region>> rem{bd(b.buf.addr(), 4096, bad)};
  lf::backend::request r;
  a.be.prepare(r, xfer_op::write, loc, rem, l.peer);
  const auto t0 = std::chrono::steady_clock::now();
  status s = a.be.post(r, std::string_view("never"));
  if (s == status::in_progress)
    s = lf_test::wait_done([&] { return a.be.check(r); }, std::chrono::seconds(10));
  CHECK(s != status::success);
  CHECK(s != status::in_progress);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  a.be.release(r);
  // No notification. (tcp;ofi_rxm answers a bad key by dropping the connection: the peer then
  // counts as failed, and no abort notice can go to it either.)
  nixl::notif_map m;
  b.be.take_notifications(m);
  CHECK(m["a"].empty());
}

TEST_CASE("libfabric backend: release in flight, then the backend goes on") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  const std::size_t n = std::size_t{32} << 20;
  side a("a", n, lf_test::tcp_params()), b("b", n, lf_test::tcp_params());
  peer_link l(a, b, "b");
  // the released requests use the first halves: what they still move may land any time later
  const std::size_t half = n / 2;
  std::vector<nixl::bound_desc<lf::backend::region>> loc{bd(a.buf.addr(), half, a.reg)};
  std::vector<nixl::bound_desc<lf::backend::remote_region>> rem{bd(b.buf.addr(), half, l.rr)};
  for (int i = 0; i < 4; ++i) {
    lf::backend::request r;
    a.be.prepare(r, i % 2 ? xfer_op::read : xfer_op::write, loc, rem, l.peer);
    const status s = a.be.post(r, std::string_view("released"));
    CHECK((s == status::success || s == status::in_progress));
    CHECK(a.be.release(r) == status::success);
    CHECK(a.be.check(r) == status::invalid_param);
  }
  // Nothing is lost: each request either ended before its release (its notification) or was
  // abandoned (an abort notice once its writes completed).
  const auto [notifs, aborts] = messages_from(b.be, "a", 4);
  INFO(notifs.size() << " notifications, " << aborts.size() << " abort notices");
  CHECK(notifs.size() + aborts.size() == 4);
  for (const auto& m : notifs) CHECK(m == "released");
  for (const auto& m : aborts) CHECK(m == "released");
  // a later transfer works
  a.buf.fill(9, half, 4096);
  loc = {bd(a.buf.addr() + half, 4096, a.reg)};
  rem = {bd(b.buf.addr() + half + 4096, 4096, l.rr)};
  lf::backend::request r;
  a.be.prepare(r, xfer_op::write, loc, rem, l.peer);
  const status s = a.be.post(r, nixl::notif_arg{});
  REQUIRE((s == status::success || s == status::in_progress));
  REQUIRE(lf_test::wait_done([&] { return a.be.check(r); }) == status::success);
  CHECK(b.buf.holds(9, half + 4096, 4096, half));
  a.be.release(r);
}

TEST_CASE("libfabric backend: without progress threads, progress() drives both sides") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  side a("a", 1 << 20, lf_test::tcp_params(), false), b("b", 1 << 20, lf_test::tcp_params(), false);
  CHECK(!a.be.has_progress_thread());
  peer_link l(a, b, "b");
  a.buf.fill(2);
  std::vector<nixl::bound_desc<lf::backend::region>> loc{bd(a.buf.addr(), 1 << 20, a.reg)};
  std::vector<nixl::bound_desc<lf::backend::remote_region>> rem{bd(b.buf.addr(), 1 << 20, l.rr)};
  lf::backend::request r;
  a.be.prepare(r, xfer_op::write, loc, rem, l.peer);
  status s = a.be.post(r, std::string_view("manual"));
  s = lf_test::wait_done([&] {
    b.be.progress();
    return a.be.check(r);
  });
  REQUIRE(s == status::success);
  CHECK(b.buf.holds(2, 0, 1 << 20, 0));
  a.be.release(r);
}

TEST_CASE("libfabric post_thread: a post while the caller polls leaves the wake-up to it") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  using clk = std::chrono::steady_clock;
  constexpr std::size_t n = std::size_t{1} << 16;
  side a("a", n, lf_test::tcp_params()), b("b", n, lf_test::tcp_params());
  peer_link l(a, b, "b");
  std::vector<nixl::bound_desc<lf::backend::region>> loc{bd(a.buf.addr(), n, a.reg)};
  std::vector<nixl::bound_desc<lf::backend::remote_region>> rem{bd(b.buf.addr(), n, l.rr)};
  lf::backend::request w;
  a.be.prepare(w, xfer_op::write, loc, rem, l.peer);
  REQUIRE(w.posted_on_thread());
  CHECK_FALSE(a.be.polled_window());
  // status checks of requests in flight open the window
  const auto poll_into_window = [&] {
    const auto until = clk::now() + std::chrono::seconds(10);
    while (!a.be.polled_window() && clk::now() < until) {
      REQUIRE(a.be.post(w, nixl::notif_arg{}) != status::invalid_param);
      CHECK(lf_test::wait_done([&] { return a.be.check(w); }) == status::success);
    }
    return a.be.polled_window();
  };
  REQUIRE(poll_into_window());
  // posted in the window and never checked: the thread, which the post did not wake, posts it
  // within its short sleep, and the notification follows the data
  a.buf.fill(7);
  const status s = a.be.post(w, std::string_view("unpolled"));
  REQUIRE((s == status::success || s == status::in_progress));
  const auto [notifs, aborts] = messages_from(b.be, "a", 1);
  CHECK(notifs == std::vector<std::string>{"unpolled"});
  CHECK(aborts.empty());
  CHECK(b.buf.holds(7, 0, n, 0));
  CHECK(lf_test::wait_done([&] { return a.be.check(w); }) == status::success);
  // without checks the window closes by itself
  const auto until = clk::now() + std::chrono::seconds(10);
  while (a.be.polled_window() && clk::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK_FALSE(a.be.polled_window());
  // a caller that stops polling to sleep hands the thread back: the window closes, and a post
  // then wakes the thread as before
  REQUIRE(poll_into_window());
  a.be.hand_back(w);
  const auto until2 = clk::now() + std::chrono::seconds(10);
  while (a.be.polled_window() && clk::now() < until2)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  CHECK_FALSE(a.be.polled_window());
  a.buf.fill(9);
  REQUIRE(a.be.post(w, std::string_view("after")) != status::invalid_param);
  const auto [n2, a2] = messages_from(b.be, "a", 1);
  CHECK(n2 == std::vector<std::string>{"after"});
  CHECK(b.buf.holds(9, 0, n, 0));
  CHECK(lf_test::wait_done([&] { return a.be.check(w); }) == status::success);
  a.be.release(w);
}

TEST_CASE("libfabric post_thread: the tcp provider's posts go to the progress thread") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  CHECK(lf::config::from_params({{"post_thread", "Never"}}).post_thread ==
        nixl::detail::post_thread_mode::never);
  CHECK(code_of([] {
          lf::config::from_params({{"post_thread", "later"}});
        }) == status::invalid_param);
  constexpr std::size_t n = std::size_t{1} << 20;
  for (const char* mode : {"auto", "never", "always"}) {
    nixl::params p = lf_test::tcp_params();
    p["post_thread"] = mode;
    side a("a", n, p), b("b", n, lf_test::tcp_params());
    peer_link l(a, b, "b");
    std::vector<nixl::bound_desc<lf::backend::region>> loc{bd(a.buf.addr(), n, a.reg)};
    std::vector<nixl::bound_desc<lf::backend::remote_region>> rem{bd(b.buf.addr(), n, l.rr)};
    lf::backend::request w;
    a.be.prepare(w, xfer_op::write, loc, rem, l.peer);
    CHECK(w.posted_on_thread() == (std::string(mode) != "never"));
    // never polled: the progress thread posts it (or the caller did), and the notification
    // arrives once the data is in
    a.buf.fill(4);
    const status s = a.be.post(w, std::string_view(mode));
    REQUIRE((s == status::success || s == status::in_progress));
    const auto [notifs, aborts] = messages_from(b.be, "a", 1);
    CHECK(notifs == std::vector<std::string>{mode});
    CHECK(aborts.empty());
    CHECK(b.buf.holds(4, 0, n, 0));
    CHECK(lf_test::wait_done([&] { return a.be.check(w); }) == status::success);
    a.be.release(w);
    // released at once after post: canceled before the thread took it up (an abort notice,
    // nothing landed), abandoned after its grace (an abort notice once every write ended), or
    // ended (its notification, every byte landed); never a part of it, nothing later
    for (int round = 0; round < 10; ++round) {
      lf::backend::request q;
      a.be.prepare(q, xfer_op::write, loc, rem, l.peer);
      b.buf.fill(0);
      a.buf.fill(static_cast<unsigned>(20 + round));
      REQUIRE(a.be.post(q, std::string_view("q")) != status::invalid_param);
      a.be.release(q);
      const auto [qn, qa] = messages_from(b.be, "a", 1);
      REQUIRE(qn.size() + qa.size() == 1);
      const bool landed = b.buf.holds(static_cast<unsigned>(20 + round), 0, n, 0);
      CHECK((landed || b.buf.holds(0, 0, n, 0)));
      if (!qn.empty()) CHECK(landed);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      CHECK(b.buf.holds(landed ? static_cast<unsigned>(20 + round) : 0, 0, n, 0));
    }
    // Last, as this test writes no more into b's memory afterwards: the data of a read leaves
    // from b's progress thread, and only what b's thread does after it orders that with this
    // thread (below).
    // polled at once: the status check may post it itself
    lf::backend::request rd;
    a.be.prepare(rd, xfer_op::read, loc, rem, l.peer);
    b.buf.fill(6);
    REQUIRE(a.be.post(rd, nixl::notif_arg{}) != status::invalid_param);
    CHECK(lf_test::wait_done([&] { return a.be.check(rd); }) == status::success);
    CHECK(a.buf.holds(6, 0, n, 0));
    a.be.release(rd);
    // b's progress thread handles this notification after it sent the read's data: taking it
    // orders that thread's reads of b's memory before b's memory goes
    a.be.notify(l.peer, "done");
    CHECK(messages_from(b.be, "a", 1).first == std::vector<std::string>{"done"});
  }
}
