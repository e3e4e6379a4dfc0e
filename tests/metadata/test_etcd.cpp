#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nixl/metadata/etcd.hpp>
#include <nixl/metadata/exchange.hpp>

#include "md_support.hpp"
#include "nixl_test/catch.hpp"

using namespace md_test;
using nixl::metadata::etcd_client;
using nixl::metadata::exchange;

namespace {

/// A client of the test etcd, to look at the keys the exchanges write.
struct test_etcd_client : etcd_client {
  test_etcd_client() : etcd_client(etcd_server::get().endpoint(), 5s) {}
};

/// Agent `name` with an exchange over etcd in a fresh namespace (`space`), and a client to look
/// at the keys it writes.
struct etcd_agent {
  etcd_agent(const std::string& space, const std::string& name)
      : ns(fresh_namespace(space)), agent(name), x(name, with_etcd(ns), agent.hooks()) {}
  std::string ns;
  test_etcd_client c;
  fake_agent agent;
  exchange x;
};

}  // namespace

TEST_CASE("base64 as the gateway encodes it", "[metadata][etcd]") {
  using nixl::metadata::base64_decode;
  using nixl::metadata::base64_encode;
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("/ns/a/metadata") == "L25zL2EvbWV0YWRhdGE=");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  CHECK(base64_decode(base64_encode(all)) == all);
  CHECK_THROWS_AS(base64_decode("abc"), nixl::error);
  CHECK_THROWS_AS(base64_decode("ab!="), nixl::error);
  CHECK_THROWS_AS(base64_decode("a=bc"), nixl::error);
}

TEST_CASE("config reads NIXL_ETCD_* and normalises the namespace", "[metadata][etcd]") {
  ::setenv("NIXL_ETCD_ENDPOINTS", "http://127.0.0.1:1", 1);
  ::setenv("NIXL_ETCD_NAMESPACE", "/my/ns//", 1);
  nixl::metadata::config c;
  auto r = c.resolved();
  CHECK(r.etcd_endpoints == "http://127.0.0.1:1");
  CHECK(r.etcd_namespace == "/my/ns");
  CHECK(c.runs_threads());
  c.read_env = false;
  CHECK(c.resolved().etcd_endpoints.empty());
  CHECK(c.resolved().etcd_namespace == "/nixl/agents");  // NIXL's default, without the double slash
  CHECK_FALSE(c.runs_threads());
  ::unsetenv("NIXL_ETCD_ENDPOINTS");
  ::unsetenv("NIXL_ETCD_NAMESPACE");
}

TEST_CASE("operations without a central store are not supported", "[metadata][etcd]") {
  fake_agent a("A");
  nixl::metadata::config c;
  c.read_env = false;
  exchange x("A", c, a.hooks());
  CHECK_FALSE(x.has_central());
  try {
    x.publish("metadata", "blob");
    FAIL("published");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == nixl::status::not_supported);
    CHECK(std::string(e.what()).find("NIXL_ETCD_ENDPOINTS") != std::string::npos);
  }
  CHECK_THROWS_AS(x.fetch_central("B"), nixl::error);
  CHECK_THROWS_AS(x.unpublish(), nixl::error);
}

TEST_CASE("etcd client: put, get, leases, delete", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  test_etcd_client c;
  auto ns = fresh_namespace("client");
  auto rev = c.put(ns + "/k1", std::string("v\0 1", 4));
  CHECK(rev > 0);
  auto r = c.get(ns + "/k1");
  REQUIRE(r.kvs.size() == 1);
  CHECK(r.kvs[0].value == std::string("v\0 1", 4));
  CHECK(c.get(ns + "/none").kvs.empty());
  auto lease = c.lease_grant(5s);
  c.put(ns + "/k2", "v2", lease);
  CHECK(c.get_prefix(ns + "/").kvs.size() == 2);
  CHECK(c.lease_keepalive(lease) > 0);
  c.lease_revoke(lease);
  CHECK(c.lease_keepalive(lease) == 0);
  CHECK(c.get(ns + "/k2").kvs.empty());  // went with the lease
  CHECK(c.delete_prefix(ns + "/") == 1);
  CHECK(c.healthy());

  etcd_client dead("127.0.0.1:1", 500ms);
  CHECK_FALSE(dead.healthy());
  try {
    dead.get("x");
    FAIL("no error");
  } catch (const nixl::error& e) {
    CHECK(std::string(e.what()).find("no endpoint answered") != std::string::npos);
  }
  // The second endpoint is used when the first does not answer.
  etcd_client two("127.0.0.1:1," + etcd_server::get().endpoint(), 2s);
  CHECK(two.get(ns + "/k1").kvs.empty());
}

TEST_CASE("publish, fetch_central, and invalidation through a watch", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  auto ns = fresh_namespace("pub");
  fake_agent a("A"), b("B");
  exchange xa("A", with_etcd(ns), a.hooks());
  exchange xb("B", with_etcd(ns), b.hooks());
  REQUIRE(xa.has_central());
  CHECK(xa.runs_threads());
  CHECK(xa.central_key("A", "metadata") == ns + "/A/metadata");

  xa.publish("metadata", a.blob()).get();
  xb.publish("metadata", b.blob()).get();
  xa.fetch_central("B").get();
  xb.fetch_central("A").get();
  CHECK(a.value("B") == b.blob());
  CHECK(b.value("A") == a.blob());

  // Partial metadata under a label.
  xa.publish("part-1", "MD:A:partial").get();
  xb.fetch_central("A", "part-1").get();
  CHECK(b.value("A") == "MD:A:partial");

  test_etcd_client c;
  auto keys = c.get_prefix(ns + "/A/");
  REQUIRE(keys.kvs.size() == 2);
  CHECK(keys.kvs[0].lease != 0);

  // A deletes its keys: B, which watches A, drops it.
  xa.unpublish().get();
  CHECK(c.get_prefix(ns + "/A/").kvs.empty());
  REQUIRE(eventually([&] { return b.was_invalidated("A"); }));
  CHECK_FALSE(b.has("A"));
  CHECK(a.has("B"));  // nothing happened to B's keys
}

TEST_CASE("fetch_central waits for a key that appears later", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  auto ns = fresh_namespace("wait");
  fake_agent a("A"), b("B");
  exchange xa("A", with_etcd(ns), a.hooks());
  auto f = xa.fetch_central("B");
  std::this_thread::sleep_for(300ms);
  CHECK(f.wait_for(0s) == std::future_status::timeout);
  exchange xb("B", with_etcd(ns), b.hooks());
  xb.publish("metadata", b.blob()).get();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  f.get();
  CHECK(a.has("B"));
}

TEST_CASE("fetch_central of a missing agent times out with a clear error", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  auto ns = fresh_namespace("missing");
  fake_agent a("A");
  auto cfg = with_etcd(ns);
  cfg.etcd_watch_timeout = 400ms;
  exchange xa("A", cfg, a.hooks());
  auto t0 = std::chrono::steady_clock::now();
  auto f = xa.fetch_central("ghost");
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto took = std::chrono::steady_clock::now() - t0;
  try {
    f.get();
    FAIL("fetched a ghost");
  } catch (const nixl::error& e) {
    INFO(e.what());
    CHECK(e.status_code() == nixl::status::not_found);
    CHECK(std::string(e.what()).find("no metadata of agent 'ghost' under '" + ns +
                                     "/ghost/metadata' after 400 ms") != std::string::npos);
  }
  CHECK(took >= 400ms);
  CHECK_FALSE(a.has("ghost"));
  // Names that would break the key layout are refused at once.
  CHECK_THROWS_AS(xa.fetch_central("a/b"), nixl::error);
  CHECK_THROWS_AS(xa.publish("", "x"), nixl::error);
}

TEST_CASE("a killed agent's keys expire and watchers drop it", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  auto ns = fresh_namespace("killed");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The doomed agent: publish, report, wait to be killed.
    ::close(ready[0]);
    try {
      fake_agent k("K");
      exchange xk("K", with_etcd(ns), k.hooks());
      xk.publish("metadata", k.blob()).get();
      xk.publish("extra", "MD:K:extra").get();
      char one = 1;
      [[maybe_unused]] auto n = ::write(ready[1], &one, 1);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(ready[1]);
  char got = 0;
  REQUIRE(::read(ready[0], &got, 1) == 1);
  ::close(ready[0]);

  fake_agent w("W");
  exchange xw("W", with_etcd(ns), w.hooks());
  xw.fetch_central("K").get();
  REQUIRE(w.has("K"));
  test_etcd_client c;
  CHECK(c.get_prefix(ns + "/K/").kvs.size() == 2);
  // Kept alive well past the TTL while the process lives.
  std::this_thread::sleep_for(3s);
  CHECK(c.get_prefix(ns + "/K/").kvs.size() == 2);

  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return c.get_prefix(ns + "/K/").kvs.empty(); }, 10s));
  auto took = std::chrono::steady_clock::now() - t0;
  INFO("keys gone after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                          << " ms");
  CHECK(took < 6s);
  REQUIRE(eventually([&] { return w.was_invalidated("K"); }, 5s));
  CHECK_FALSE(w.has("K"));
}

TEST_CASE("a destroyed exchange revokes its lease at once", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  etcd_agent s("revoke", "W");
  auto& [ns, c, w, xw] = s;
  {
    fake_agent a("A");
    auto cfg = with_etcd(ns);
    cfg.etcd_lease_ttl = 60s;
    exchange xa("A", cfg, a.hooks());
    xa.publish("metadata", a.blob()).get();
    xw.fetch_central("A").get();
    CHECK(c.get_prefix(ns + "/A/").kvs.size() == 1);
  }
  CHECK(c.get_prefix(ns + "/A/").kvs.empty());
  REQUIRE(eventually([&] { return w.was_invalidated("A"); }));
}

TEST_CASE("a lost lease is replaced and our keys are put back", "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  etcd_agent s("relapse", "A");
  auto& [ns, c, a, xa] = s;
  xa.publish("metadata", a.blob()).get();
  xa.publish("part", "MD:A:part").get();
  auto before = c.get(ns + "/A/metadata");
  REQUIRE(before.kvs.size() == 1);
  // Someone (or an etcd restart) drops the lease behind our back.
  c.lease_revoke(before.kvs[0].lease);
  CHECK(c.get_prefix(ns + "/A/").kvs.empty());
  REQUIRE(eventually([&] { return c.get_prefix(ns + "/A/").kvs.size() == 2; }, 5s));
  auto after = c.get(ns + "/A/metadata");
  REQUIRE(after.kvs.size() == 1);
  CHECK(after.kvs[0].value == a.blob());
  CHECK(after.kvs[0].lease != before.kvs[0].lease);
  // Withdrawn keys are not put back.
  xa.unpublish().get();
  std::this_thread::sleep_for(1500ms);
  CHECK(c.get_prefix(ns + "/A/").kvs.empty());
}

TEST_CASE("the etcd server stopped and restarted: clear errors meanwhile, then service again",
          "[metadata][etcd]") {
  NIXL_REQUIRE_ETCD();
  etcd_process srv;  // a server of its own: the others' tests keep theirs
  if (srv.endpoint().empty()) NIXL_SKIP("etcd restart test: " << srv.why_absent());
  const auto ns = fresh_namespace("restart");
  auto cfg = with_etcd(ns);
  cfg.etcd_endpoints = srv.endpoint();
  cfg.etcd_request_timeout = 1s;
  cfg.etcd_watch_timeout = 1s;
  fake_agent a("A"), w("W");
  exchange xa("A", cfg, a.hooks()), xw("W", cfg, w.hooks());
  xa.publish("metadata", a.blob()).get();
  xw.fetch_central("A").get();
  REQUIRE(w.has("A"));

  REQUIRE(srv.halt());
  // While it is down: each operation ends with an error, within its deadline.
  const auto ends_with_error = [](std::future<void> f) {
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took < 5s);
    nixl::status st = nixl::status::success;
    try {
      f.get();
    } catch (const nixl::error& e) {
      st = e.status_code();
      INFO(e.what());
      CHECK(std::string(e.what()).find("etcd") != std::string::npos);
    }
    return st;
  };
  CHECK(ends_with_error(xa.publish("part", "MD:A:part")) != nixl::status::success);
  CHECK(ends_with_error(xw.fetch_central("B")) != nixl::status::success);

  REQUIRE(srv.resume());
  // Back: publishing and fetching work again, A's lease is kept alive (its keys outlive the
  // TTL), and W's watch, re-created, still sees A withdraw.
  REQUIRE(eventually(
      [&] {
        try {
          xa.publish("part", "MD:A:part").get();
          return true;
        } catch (const nixl::error&) {
          return false;
        }
      },
      10s));
  fake_agent b("B");
  exchange xb("B", cfg, b.hooks());
  xb.publish("metadata", b.blob()).get();
  xw.fetch_central("B").get();
  CHECK(w.has("B"));
  std::this_thread::sleep_for(cfg.etcd_lease_ttl + 1s);
  etcd_client c(srv.endpoint(), 5s);
  CHECK(c.get(ns + "/A/metadata").kvs.size() == 1);
  xa.unpublish().get();
  CHECK(eventually([&] { return w.was_invalidated("A"); }, 10s));
}
