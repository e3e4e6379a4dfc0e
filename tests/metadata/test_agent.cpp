// An agent driven by a metadata exchange (nixl::metadata::exchange{agent, config}), then data
// movement with the in-process MEMCPY test backend (and UCX when it is built).
#include <nixl/agent.hpp>
#include <nixl/metadata/exchange.hpp>

#include <numeric>

#include "md_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/fixtures.hpp"

#if defined(NIXL_HAS_UCX)
#include <nixl/backends/ucx.hpp>
#endif

using namespace md_test;
using metadata_target = nixl::metadata::target;
using nixl::status;
using nixl::xfer_op;
using nixl::test::buffer;
using nixl::test::memcpy_backend;
using nixl::test::test_agent;

namespace {

nixl::metadata::config listening_agent() {
  return listening();
}

nixl::metadata::config etcd_agent(const std::string& ns, bool listen = false) {
  auto c = with_etcd(ns, listen);
  c.etcd_watch_timeout = std::chrono::seconds(5);
  return c;
}

nixl::metadata::config quiet_exchange() {
  nixl::metadata::config c;
  c.read_env = false;
  return c;
}

/// An agent with its exchange (declared after it, so destroyed first).
template <class Agent>
struct node {
  Agent agent;
  nixl::metadata::exchange x;
  node(std::string name, nixl::metadata::config cfg, nixl::agent_config acfg = {})
      : agent(std::move(name), std::move(acfg)), x(agent, std::move(cfg)) {}
  std::uint16_t port() const noexcept { return x.port(); }
};
using test_node = node<test_agent>;

using nixl::test::code_of;

/// One agent of a group, its exchange and a buffer it registered.
struct member {
  std::unique_ptr<test_node> n;
  test_agent* agent;
  nixl::metadata::exchange* x;
  buffer buf;
  member(std::string name, nixl::metadata::config cfg, std::size_t size)
      : n(std::make_unique<test_node>(std::move(name), std::move(cfg))),
        agent(&n->agent),
        x(&n->x),
        buf(size) {
    agent->create_backend<memcpy_backend>();
    agent->register_memory(buf.reg());
  }
};

/// Every member writes a pattern into the next one's buffer and reads it back from there.
void ring_transfers(std::vector<std::unique_ptr<member>>& ms, std::size_t block) {
  const std::size_t n = ms.size();
  for (std::size_t i = 0; i < n; ++i) {
    auto& me = *ms[i];
    auto& next = *ms[(i + 1) % n];
    // Our block i of the buffer goes to the neighbour's block i.
    std::fill(me.buf.bytes.begin() + i * block, me.buf.bytes.begin() + (i + 1) * block,
              static_cast<unsigned char>(0x10 + i));
    nixl::xfer_list<nixl::dram_t> local{{me.buf.addr(i * block), block, 0}};
    nixl::xfer_list<nixl::dram_t> remote{{next.buf.addr(i * block), block, 0}};
    auto w =
        me.agent->create_request(xfer_op::write, local, remote, next.agent->name(), {.notif = "w"});
    REQUIRE(nixl::test::wait(w) == status::not_posted);
    REQUIRE(w.post() != status::not_posted);
    REQUIRE(nixl::test::wait(w) == status::success);
    CHECK(next.buf.bytes[i * block] == 0x10 + i);
    CHECK(next.buf.bytes[(i + 1) * block - 1] == 0x10 + i);
    std::fill(me.buf.bytes.begin() + i * block, me.buf.bytes.begin() + (i + 1) * block, 0);
    auto r = me.agent->create_request(xfer_op::read, local, remote, next.agent->name());
    REQUIRE(r.post() != status::not_posted);
    REQUIRE(nixl::test::wait(r) == status::success);
    CHECK(me.buf.bytes[i * block] == 0x10 + i);
  }
}

bool knows_all(std::vector<std::unique_ptr<member>>& ms) {
  for (auto& a : ms)
    for (auto& b : ms)
      if (a != b && !a->agent->check_remote_metadata(b->agent->name())) return false;
  return true;
}

}  // namespace

TEST_CASE("agent: listener upgrades none to strict and reports its port", "[metadata][agent]") {
  test_node quiet("quiet", quiet_exchange());
  CHECK(quiet.agent.sync_mode() == nixl::thread_sync::none);
  CHECK(quiet.port() == 0);
  test_node a("a", listening_agent());
  CHECK(a.agent.sync_mode() == nixl::thread_sync::strict);
  CHECK(a.port() != 0);
  test_node b("b", listening_agent(), {.sync = nixl::thread_sync::rw});
  CHECK(b.agent.sync_mode() == nixl::thread_sync::rw);
}

TEST_CASE("agent: two agents exchange metadata both ways over the listener, then move data",
          "[metadata][agent]") {
  std::vector<std::unique_ptr<member>> ms;
  ms.push_back(std::make_unique<member>("prefill", listening_agent(), 2 * 4096));
  ms.push_back(std::make_unique<member>("decode", listening_agent(), 2 * 4096));
  auto& a = *ms[0]->agent;
  auto& b = *ms[1]->agent;
  auto& ax = *ms[0]->x;
  auto& bx = *ms[1]->x;
  // a pushes its metadata to b; a pulls b's. Neither waits on the futures: check_remote_metadata
  // is how NIXL code observes completion.
  (void)ax.send_local_metadata(metadata_target::peer("127.0.0.1", bx.port()));
  (void)ax.fetch_remote_metadata("decode", metadata_target::peer("127.0.0.1", bx.port()));
  REQUIRE(eventually([&] { return knows_all(ms); }));
  ring_transfers(ms, 4096);
  auto notifs = b.notifications();
  CHECK(notifs["prefill"] == std::vector<std::string>{"w"});

  SECTION("invalidation is observed by the peer") {
    ax.invalidate_local_metadata(metadata_target::peer("127.0.0.1", bx.port())).get();
    CHECK_FALSE(b.check_remote_metadata("prefill"));
    nixl::xfer_list<nixl::dram_t> one{{ms[1]->buf.addr(), 8, 0}};
    nixl::xfer_list<nixl::dram_t> other{{ms[0]->buf.addr(), 8, 0}};
    CHECK(code_of([&] { b.create_request(xfer_op::write, one, other, "prefill"); }) ==
          status::not_found);
    // Fetching again brings it back.
    bx.fetch_remote_metadata("prefill", metadata_target::peer("127.0.0.1", ax.port())).get();
    CHECK(b.check_remote_metadata("prefill"));
  }
  SECTION("partial metadata: connection info, then one region") {
    buffer extra(512);
    a.register_memory(extra.reg());
    nixl::xfer_list<nixl::dram_t> probe{{extra.addr(), 512, 0}};
    CHECK_FALSE(b.check_remote_metadata("prefill", probe));
    ax.send_partial_metadata(extra.reg(), false, metadata_target::peer("127.0.0.1", bx.port()))
        .get();
    CHECK(b.check_remote_metadata("prefill", probe));
  }
  SECTION("a peer names itself wrongly") {
    auto f =
        ax.fetch_remote_metadata("someone-else", metadata_target::peer("127.0.0.1", bx.port()));
    CHECK(code_of([&] { f.get(); }) == status::not_found);
  }
}

TEST_CASE("agent: eight agents over listeners", "[metadata][agent]") {
  constexpr std::size_t n = 8, block = 1024;
  std::vector<std::unique_ptr<member>> ms;
  for (std::size_t i = 0; i < n; ++i)
    ms.push_back(
        std::make_unique<member>("agent-" + std::to_string(i), listening_agent(), n * block));
  // Each agent pushes its metadata to every other one, from its own thread.
  std::vector<std::thread> ts;
  for (std::size_t i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      for (std::size_t j = 0; j < n; ++j) {
        if (i == j) continue;
        (void)ms[i]->x->send_local_metadata(metadata_target::peer("127.0.0.1", ms[j]->x->port()));
      }
    });
  }
  for (auto& t : ts) t.join();
  REQUIRE(eventually([&] { return knows_all(ms); }, 10s));
  ring_transfers(ms, block);
  // One leaves: everybody it told drops it.
  for (std::size_t j = 1; j < n; ++j)
    ms[0]->x->invalidate_local_metadata(metadata_target::peer("127.0.0.1", ms[j]->x->port())).get();
  for (std::size_t j = 1; j < n; ++j) CHECK_FALSE(ms[j]->agent->check_remote_metadata("agent-0"));
}

TEST_CASE("agent: a fetch from a missing peer fails clearly", "[metadata][agent]") {
  test_node n("a", listening_agent());
  auto& a = n.agent;
  a.create_backend<memcpy_backend>();
  // Our own port, once we are gone, is a port where nobody listens.
  std::uint16_t port = 0;
  {
    test_node gone("gone", listening_agent());
    port = gone.port();
  }
  auto f = n.x.fetch_remote_metadata("gone", metadata_target::peer("127.0.0.1", port));
  try {
    f.get();
    FAIL("fetched from nobody");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == status::remote_disconnect);
    CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  }
  CHECK_FALSE(a.check_remote_metadata("gone"));
  // No ip and no central store.
  CHECK(code_of([&] { (void)n.x.fetch_remote_metadata("gone"); }) == status::invalid_param);
  CHECK(code_of([&] { (void)n.x.send_local_metadata(); }) == status::invalid_param);
  CHECK(code_of([&] {
          (void)n.x.fetch_remote_metadata("a", metadata_target::peer("127.0.0.1", port));
        }) == status::invalid_param);
}

TEST_CASE("agent: without a listener, requests run on the caller's thread", "[metadata][agent]") {
  test_node quiet("quiet", quiet_exchange());
  quiet.agent.create_backend<memcpy_backend>();
  test_node server("server", listening_agent());
  server.agent.create_backend<memcpy_backend>();
  CHECK(quiet.agent.sync_mode() == nixl::thread_sync::none);
  quiet.x.fetch_remote_metadata("server", metadata_target::peer("127.0.0.1", server.port())).get();
  CHECK(quiet.agent.check_remote_metadata("server"));
  quiet.x.send_local_metadata(metadata_target::peer("127.0.0.1", server.port())).get();
  CHECK(server.agent.check_remote_metadata("quiet"));
}

TEST_CASE("agent: two and eight agents find each other through etcd", "[metadata][agent][etcd]") {
  NIXL_REQUIRE_ETCD();
  const std::size_t n = GENERATE(std::size_t{2}, std::size_t{8});
  const std::size_t block = 1024;
  auto ns = fresh_namespace("agents");
  std::vector<std::unique_ptr<member>> ms;
  for (std::size_t i = 0; i < n; ++i)
    ms.push_back(std::make_unique<member>("node-" + std::to_string(i), etcd_agent(ns), n * block));
  CHECK(ms[0]->agent->sync_mode() == nixl::thread_sync::strict);
  // Fetch first (waits for keys not there yet), then publish.
  std::vector<std::future<void>> fetches;
  for (auto& a : ms)
    for (auto& b : ms)
      if (a != b) fetches.push_back(a->x->fetch_remote_metadata(b->agent->name()));
  for (auto& a : ms) a->x->send_local_metadata().get();
  for (auto& f : fetches) f.get();
  REQUIRE(knows_all(ms));
  ring_transfers(ms, block);

  // Partial metadata under a label.
  buffer extra(256);
  ms[0]->agent->register_memory(extra.reg());
  ms[0]->x->send_partial_metadata(extra.reg(), false, metadata_target::central("extra")).get();
  nixl::xfer_list<nixl::dram_t> probe{{extra.addr(), 256, 0}};
  CHECK_FALSE(ms[1]->agent->check_remote_metadata("node-0", probe));
  ms[1]->x->fetch_remote_metadata("node-0", metadata_target::central("extra")).get();
  CHECK(ms[1]->agent->check_remote_metadata("node-0", probe));
  CHECK(code_of([&] {
          (void)ms[0]->x->send_partial_metadata(extra.reg(), false, metadata_target::central());
        }) == status::invalid_param);

  // node-0 withdraws: every peer drops it through its watch.
  ms[0]->x->invalidate_local_metadata().get();
  for (std::size_t j = 1; j < n; ++j) {
    auto& other = *ms[j]->agent;
    CHECK(eventually([&] { return !other.check_remote_metadata("node-0"); }));
  }
  // The others are untouched.
  CHECK(ms[0]->agent->check_remote_metadata("node-1"));

  // A missing agent: a bounded wait, then a clear error.
  auto cfg = etcd_agent(ns);
  cfg.etcd_watch_timeout = std::chrono::milliseconds(300);
  test_node lonely("lonely", cfg);
  auto f = lonely.x.fetch_remote_metadata("nobody");
  try {
    f.get();
    FAIL("fetched nobody");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == status::not_found);
    CHECK(std::string(e.what()).find("'nobody'") != std::string::npos);
  }
}

#if defined(NIXL_HAS_UCX)
TEST_CASE("agent: two and eight agents exchange metadata, then move data over UCX",
          "[metadata][agent][ucx]") {
  using ucx_node = node<nixl::agent<nixl::ucx::backend>>;
  const std::size_t n = GENERATE(std::size_t{2}, std::size_t{8});
  constexpr std::size_t block = 1 << 14;
  std::vector<std::unique_ptr<ucx_node>> ns;
  std::vector<nixl::agent<nixl::ucx::backend>*> as;
  std::vector<std::vector<unsigned char>> bufs(n, std::vector<unsigned char>(n * block));
  auto addr = [&](std::size_t i, std::size_t off) {
    return reinterpret_cast<std::uintptr_t>(bufs[i].data()) + off;
  };
  for (std::size_t i = 0; i < n; ++i) {
    ns.push_back(std::make_unique<ucx_node>("ucx-" + std::to_string(i), listening_agent()));
    as.push_back(&ns[i]->agent);
    as[i]->create_backend<nixl::ucx::backend>();
    as[i]->register_memory(nixl::reg_list<nixl::dram_t>{{{addr(i, 0), n * block, 0}, ""}});
  }
  // For each pair, the lower-numbered agent pushes its metadata and pulls the other's.
  std::vector<std::future<void>> fs;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      auto at = metadata_target::peer("127.0.0.1", ns[j]->port());
      if (j <= i) continue;
      fs.push_back(ns[i]->x.send_local_metadata(at));
      fs.push_back(ns[i]->x.fetch_remote_metadata(as[j]->name(), at));
    }
  for (auto& f : fs) f.get();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j) REQUIRE(as[i]->check_remote_metadata(as[j]->name()));
  // Ring: agent i writes its block i into agent i+1's block i and notifies it.
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t next = (i + 1) % n;
    std::fill_n(bufs[i].begin() + i * block, block, static_cast<unsigned char>(0x40 + i));
    nixl::xfer_list<nixl::dram_t> l{{addr(i, i * block), block, 0}};
    nixl::xfer_list<nixl::dram_t> r{{addr(next, i * block), block, 0}};
    auto w = as[i]->create_request(xfer_op::write, l, r, as[next]->name(), {.notif = "ring"});
    auto s = w.post();
    auto end = std::chrono::steady_clock::now() + 10s;
    while (s == status::in_progress && std::chrono::steady_clock::now() < end) s = w.status();
    REQUIRE(s == status::success);
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t next = (i + 1) % n;
    std::vector<std::string> got;
    REQUIRE(eventually(
        [&] {
          auto m = as[next]->notifications();
          for (auto& x : m[as[i]->name()]) got.push_back(x);
          return !got.empty();
        },
        10s));
    CHECK(bufs[next][i * block] == 0x40 + i);
    CHECK(bufs[next][(i + 1) * block - 1] == 0x40 + i);
  }
  // The first one leaves; every peer it tells drops it.
  for (std::size_t j = 1; j < n; ++j)
    ns[0]->x.invalidate_local_metadata(metadata_target::peer("127.0.0.1", ns[j]->port())).get();
  for (std::size_t j = 1; j < n; ++j) CHECK_FALSE(as[j]->check_remote_metadata("ucx-0"));
}
#endif
