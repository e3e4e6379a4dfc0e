// The LIBFABRIC backend through nixl::agent: two agents of one process over tcp;ofi_rxm on
// loopback and over shm, and an agent with itself.

#include <nixl/agent.hpp>
#include <nixl/backends/libfabric.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lf_support.hpp"
#include "nixl_test/agent_waits.hpp"

using namespace nixl::test::agent_names;
using lf_test::buffer;
using lf_test::code_of;
using lf_agent = nixl::agent<nixl::libfabric::backend>;

namespace {

using nixl::test::blocks;
using nixl::test::wait;
using nixl::test::wait_notifs;

struct pair {
  buffer ib, tb;
  lf_agent init{"initiator"}, tgt{"target"};
  pair(std::size_t n, const nixl::params& p) : ib(n), tb(n) {
    init.create_backend<nixl::libfabric::backend>(p);
    tgt.create_backend<nixl::libfabric::backend>(p);
    init.register_memory(nixl::reg_list<nixl::dram_t>{{{ib.addr(), n, 0}, ""}});
    tgt.register_memory(nixl::reg_list<nixl::dram_t>{{{tb.addr(), n, 0}, ""}});
    init.load_remote_metadata(tgt.local_metadata());
    tgt.load_remote_metadata(init.local_metadata());
  }
};

nixl::params provider_params(const std::string& prov) {
  if (prov == "shm") return lf_test::shm_params();
  if (prov == "tcp2") return lf_test::tcp_params("lo,lo");
  return lf_test::tcp_params();
}

}  // namespace

/// Runs the test case once per provider (`prov`, with its parameters `params`); one this host
/// lacks ends its run with the reason.
#define LF_EACH_PROVIDER(prov, params)                                                     \
  const auto prov = GENERATE(std::string("tcp"), std::string("tcp2"), std::string("shm")); \
  const nixl::params params = provider_params(prov);                                       \
  if (auto why = lf_test::unavailable(params); !why.empty()) NIXL_SKIP(prov << ": " << why)

TEST_CASE("libfabric agents: READ and WRITE, 1 B to 16 MiB, 1 and 500 descriptors") {
  LF_EACH_PROVIDER(prov, params);
  const std::size_t big = 16 << 20;
  pair p(big, params);
  struct shape {
    std::size_t count, size;
  };
  for (const shape s : {shape{1, 1}, shape{1, 4096}, shape{1, 1 << 20}, shape{1, big},
                        shape{500, 1}, shape{500, 8192}}) {
    for (const auto op : {xfer_op::write, xfer_op::read}) {
      CAPTURE(prov, s.count, s.size, nixl::to_string(op));
      const unsigned seed = static_cast<unsigned>(s.count + s.size) + static_cast<unsigned>(op);
      buffer& src = op == xfer_op::write ? p.ib : p.tb;
      buffer& dst = op == xfer_op::write ? p.tb : p.ib;
      src.fill(seed, 0, s.count * s.size);
      nixl::xfer_options opt;
      opt.notif = fmt::format("xfer {} {} {}", s.count, s.size, nixl::to_string(op));
      auto r = p.init.create_request(op, blocks(p.ib.addr(), s.count, s.size),
                                     blocks(p.tb.addr(), s.count, s.size, true), "target", opt);
      const status st = r.post();
      REQUIRE((st == status::success || st == status::in_progress));
      REQUIRE(wait(r) == status::success);
      // the notification comes after the data: check the data once it is there
      auto got = wait_notifs(p.tgt, "initiator", 1);
      REQUIRE(got.size() == 1);
      CHECK(got[0] == *opt.notif);
      bool ok = true;
      for (std::size_t i = 0; i < s.count && ok; ++i) {
        const std::size_t li = i * s.size, ri = (s.count - 1 - i) * s.size;
        ok = op == xfer_op::write ? dst.holds(seed, ri, s.size, li)
                                  : dst.holds(seed, li, s.size, ri);
      }
      CHECK(ok);
    }
  }
}

TEST_CASE("libfabric agents: every notification follows its data, standalone ones too") {
  LF_EACH_PROVIDER(prov, params);
  const std::size_t n = 4 << 20;
  pair p(n, params);
  // The target checks, at each notification, that the data of that transfer is in place.
  const int rounds = 20;
  int checked = 0;
  for (int i = 0; i < rounds; ++i) {
    p.ib.fill(static_cast<unsigned>(i + 1));
    auto r =
        p.init.create_request(xfer_op::write, blocks(p.ib.addr(), 1, n), blocks(p.tb.addr(), 1, n),
                              "target", {.notif = fmt::format("round {}", i)});
    REQUIRE(r.post() != status::backend);
    nixl::notif_map m;
    REQUIRE(lf_test::wait_done([&] {
              p.tgt.notifications(m);
              return m["initiator"].empty() ? status::in_progress : status::success;
            }) == status::success);
    CHECK(m["initiator"][0] == fmt::format("round {}", i));
    checked += p.tb.holds(static_cast<unsigned>(i + 1), 0, n, 0) ? 1 : 0;
    REQUIRE(wait(r) == status::success);
  }
  CHECK(checked == rounds);
  // standalone, binary safe, both ways; too long refused
  const std::string bin("a\0b\xff", 4);
  p.init.notify("target", bin);
  p.tgt.notify("initiator", "back");
  CHECK(wait_notifs(p.tgt, "initiator", 1).at(0) == bin);
  CHECK(wait_notifs(p.init, "target", 1).at(0) == "back");
  CHECK(code_of([&] { p.init.notify("target", std::string(70000, 'x')); }) ==
        status::invalid_param);
}

TEST_CASE("libfabric agents: an agent writes to itself") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  buffer b(1 << 20);
  lf_agent a{"self"};
  a.create_backend<nixl::libfabric::backend>(lf_test::tcp_params());
  a.register_memory(nixl::reg_list<nixl::dram_t>{{{b.addr(), b.size(), 0}, ""}});
  b.fill(4, 0, 4096);
  auto r = a.create_request(xfer_op::write, blocks(b.addr(), 1, 4096),
                            blocks(b.addr() + 65536, 1, 4096), "self", {.notif = "me"});
  REQUIRE(r.post() != status::backend);
  REQUIRE(wait(r) == status::success);
  CHECK(b.holds(4, 65536, 4096, 0));
  CHECK(wait_notifs(a, "self", 1).at(0) == "me");
}

TEST_CASE("libfabric agents: garbage metadata is refused, a destroyed peer is seen") {
  if (auto why = lf_test::unavailable(lf_test::tcp_params()); !why.empty()) NIXL_SKIP(why);
  buffer ib(1 << 20), tb(1 << 20);
  lf_agent init{"initiator"};
  auto tgt = std::make_unique<lf_agent>("target");
  init.create_backend<nixl::libfabric::backend>(lf_test::tcp_params());
  tgt->create_backend<nixl::libfabric::backend>(lf_test::tcp_params());
  init.register_memory(nixl::reg_list<nixl::dram_t>{{{ib.addr(), ib.size(), 0}, ""}});
  tgt->register_memory(nixl::reg_list<nixl::dram_t>{{{tb.addr(), tb.size(), 0}, ""}});
  const std::string md = tgt->local_metadata();
  init.load_remote_metadata(md);
  tgt->load_remote_metadata(init.local_metadata());
  lf_agent other{"other"};
  other.create_backend<nixl::libfabric::backend>(lf_test::tcp_params());
  int refused = 0;
  for (std::size_t i = 8; i < md.size(); i += 7) {
    std::string bad = md;
    bad[i] = static_cast<char>(bad[i] ^ 0x24);
    try {
      other.load_remote_metadata(bad);
      other.invalidate_remote_metadata("target");
    } catch (const nixl::error&) {
      ++refused;
    }
  }
  CHECK(refused > 0);
  // the target goes away: the next transfer to it fails, bounded
  auto r = init.create_request(xfer_op::write, blocks(ib.addr(), 1, 4096),
                               blocks(tb.addr(), 1, 4096), "target");
  REQUIRE(r.post() != status::backend);
  REQUIRE(wait(r) == status::success);
  tgt.reset();
  const auto t0 = std::chrono::steady_clock::now();
  status s = status::success;
  while (s == status::success && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    s = r.post();
    if (s == status::in_progress)
      s = lf_test::wait_done([&] { return r.status(); }, std::chrono::seconds(5));
  }
  CHECK(s == status::remote_disconnect);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}

TEST_CASE("libfabric agents: an agent of this process goes, the other goes on") {
  // libfabric's shm provider reaches an endpoint of the same process through that endpoint's
  // own memory: the other agent must neither send to it nor answer it once it is destroyed.
  const auto prov = GENERATE(std::string("shm"), std::string("tcp"));
  const nixl::params params = provider_params(prov);
  if (auto why = lf_test::unavailable(params); !why.empty()) NIXL_SKIP(prov << ": " << why);
  CAPTURE(prov);
  const std::size_t n = 1 << 20;
  buffer ib(n), tb(n);
  auto init = std::make_unique<lf_agent>("initiator");
  auto tgt = std::make_unique<lf_agent>("target");
  init->create_backend<nixl::libfabric::backend>(params);
  tgt->create_backend<nixl::libfabric::backend>(params);
  init->register_memory(nixl::reg_list<nixl::dram_t>{{{ib.addr(), n, 0}, ""}});
  tgt->register_memory(nixl::reg_list<nixl::dram_t>{{{tb.addr(), n, 0}, ""}});
  const std::string tgt_md = tgt->local_metadata();
  init->load_remote_metadata(tgt_md);
  tgt->load_remote_metadata(init->local_metadata());
  {
    auto r = init->create_request(xfer_op::write, blocks(ib.addr(), 1, n), blocks(tb.addr(), 1, n),
                                  "target", {.notif = "before"});
    REQUIRE(r.post() != status::backend);
    REQUIRE(wait(r) == status::success);
    // both send to each other, then the target goes while the initiator's heartbeats run
    init->notify("target", "ping");
    tgt->notify("initiator", "pong");
    tgt.reset();
    const auto t0 = std::chrono::steady_clock::now();
    status s = status::success;
    while (s == status::success &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
      s = r.post();
      if (s == status::in_progress)
        s = lf_test::wait_done([&] { return r.status(); }, std::chrono::seconds(5));
    }
    CHECK(s == status::remote_disconnect);
    // heartbeats go on for a while: none may reach the destroyed agent
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  // its metadata is refused now (inserting its address would reach freed memory with shm)
  lf_agent late{"late"};
  late.create_backend<nixl::libfabric::backend>(params);
  CHECK(code_of([&] { late.load_remote_metadata(tgt_md); }) == status::remote_disconnect);
}

TEST_CASE("libfabric agents: request::wait and wait_notifications end with the transfer") {
  using namespace std::chrono_literals;
  using clk = std::chrono::steady_clock;
  LF_EACH_PROVIDER(prov, params);
  const std::size_t n = 1 << 20;
  pair p(n, params);
  CHECK(p.init.get_backend<nixl::libfabric::backend>().wakes_waiters() ==
        p.init.get_backend<nixl::libfabric::backend>().has_progress_thread());
  for (int i = 0; i < 5; ++i) {
    p.ib.fill(static_cast<unsigned>(i + 40));
    auto r =
        p.init.create_request(xfer_op::write, blocks(p.ib.addr(), 1, n), blocks(p.tb.addr(), 1, n),
                              "target", {.notif = fmt::format("waited {}", i)});
    const status s = r.post();
    REQUIRE((s == status::success || s == status::in_progress));
    const auto t0 = clk::now();
    REQUIRE(r.wait(30s) == status::success);
    CHECK(clk::now() - t0 < 30s);
    nixl::notif_map m;
    REQUIRE(p.tgt.wait_notifications(m, 30s));
    CHECK(m["initiator"] == std::vector<std::string>{fmt::format("waited {}", i)});
    CHECK(p.tb.holds(static_cast<unsigned>(i + 40), 0, n, 0));
  }
  nixl::notif_map none;
  const auto t1 = clk::now();
  CHECK_FALSE(p.tgt.wait_notifications(none, 100ms));
  CHECK(clk::now() - t1 >= 100ms);
  CHECK(clk::now() - t1 < 100ms + 500ms);
}

TEST_CASE("libfabric agents: a target learns that an agent which only sent to it is gone") {
  // The target never loads the initiator's metadata: it watches the initiator by the heartbeats
  // it receives (docs/libfabric.md, "Agents found gone"). An invalidation is not an end: the
  // initiator says bye; its destruction is one.
  using namespace std::chrono_literals;
  using clk = std::chrono::steady_clock;
  LF_EACH_PROVIDER(prov, params);
  const std::size_t n = 1 << 16;
  buffer ib(n), tb(n);
  auto init = std::make_unique<lf_agent>("initiator");
  lf_agent tgt{"target"};
  init->create_backend<nixl::libfabric::backend>(params);
  tgt.create_backend<nixl::libfabric::backend>(params);
  init->register_memory(nixl::reg_list<nixl::dram_t>{{{ib.addr(), n, 0}, ""}});
  tgt.register_memory(nixl::reg_list<nixl::dram_t>{{{tb.addr(), n, 0}, ""}});
  const std::string tgt_md = tgt.local_metadata();
  const auto transfer = [&](const std::string& note) {
    auto r = init->create_request(xfer_op::write, blocks(ib.addr(), 1, n), blocks(tb.addr(), 1, n),
                                  "target", {.notif = note});
    REQUIRE(r.post() != status::backend);
    REQUIRE(wait(r) == status::success);
    REQUIRE(wait_notifs(tgt, "initiator", 1) == std::vector<std::string>{note});
  };
  init->load_remote_metadata(tgt_md);
  transfer("first");
  // several heartbeat periods: the target watches the initiator, alive
  std::this_thread::sleep_for(500ms);
  CHECK(tgt.gone_agents().empty());

  // unloaded: the heartbeats stop with a bye; past the silence limit it is not gone
  init->invalidate_remote_metadata("target");
  std::this_thread::sleep_for(lf_test::peer_timeout + 800ms);
  CHECK(tgt.gone_agents().empty());

  // loaded again and destroyed: gone, and a waiting target wakes
  init->load_remote_metadata(tgt_md);
  transfer("second");
  std::this_thread::sleep_for(300ms);  // a few pings: watched again
  REQUIRE(tgt.gone_agents().empty());
  init.reset();
  const auto t0 = clk::now();
  nixl::notif_map notifs, aborts;
  std::vector<std::string> gone;
  while (gone.empty() && clk::now() - t0 < 10s) {
    tgt.wait_notifications(notifs, aborts, 1s);
    gone = tgt.gone_agents();
  }
  CHECK(gone == std::vector<std::string>{"initiator"});
  CHECK(clk::now() - t0 < lf_test::peer_timeout + 1s);
}
