#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include <nixl/log.hpp>
#include <nixl/metadata/exchange.hpp>

#include "md_support.hpp"
#include "nixl_test/catch.hpp"

using namespace md_test;
using nixl::metadata::exchange;

namespace {

/// Expects the future to fail with `code`; returns the message.
std::string failure(std::future<void> f, nixl::status code) {
  REQUIRE(f.wait_for(30s) == std::future_status::ready);
  try {
    f.get();
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == code);
    return e.what();
  }
  FAIL("the operation succeeded");
  return {};
}

/// A raw TCP client for feeding a listener bad input.
struct raw_client {
  int fd = -1;
  raw_client(std::uint16_t port, bool v6 = false) {
    fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    int rc;
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(port);
      a.sin6_addr = in6addr_loopback;
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    REQUIRE(rc == 0);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~raw_client() {
    if (fd >= 0) ::close(fd);
  }
  void write(std::string_view s) const {
    [[maybe_unused]] auto n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
  }
  /// Reads until the peer closes (or 5 s pass); returns what came.
  std::string read_to_close() const {
    std::string all;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      all.append(buf, static_cast<std::size_t>(n));
    }
    return all;
  }
  bool closed_by_peer() const {
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }
};

bool ipv6_loopback() {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("send, fetch and invalidate between two listeners", "[metadata][p2p]") {
  std::string address = GENERATE(std::string("127.0.0.1"), std::string("::1"));
  if (address == "::1" && !ipv6_loopback()) NIXL_SKIP("no IPv6 loopback on this machine");
  fake_agent a("A"), b("B");
  exchange xa("A", listening(address), a.hooks());
  exchange xb("B", listening(address), b.hooks());
  REQUIRE(xa.port() != 0);
  REQUIRE(xb.port() != 0);
  CHECK(xa.runs_threads());

  xa.send(address, xb.port(), a.blob()).get();  // A -> B
  CHECK(b.value("A") == a.blob());
  xa.fetch(address, xb.port(), "B").get();  // B -> A, on request
  CHECK(a.value("B") == b.blob());

  // Both ways at once, without waiting on the futures: completion is observed on the peer.
  auto f1 = xb.send(address, xa.port(), "MD:B:second");
  auto f2 = xb.fetch(address, xa.port());
  REQUIRE(eventually([&] { return a.value("B") == "MD:B:second" && b.has("A"); }));
  f1.get();
  f2.get();

  xa.invalidate_at(address, xb.port()).get();
  CHECK_FALSE(b.has("A"));
  CHECK(b.was_invalidated("A"));
  CHECK(xb.stats().served >= 3);
  CHECK(xb.stats().rejected == 0);
}

TEST_CASE("peer errors come back with their status and message", "[metadata][p2p]") {
  fake_agent a("A"), b("B");
  exchange xa("A", listening(), a.hooks());
  exchange xb("B", listening(), b.hooks());

  auto msg = failure(xa.send("127.0.0.1", xb.port(), "not metadata"), nixl::status::mismatch);
  CHECK(msg.find("fake: not metadata") != std::string::npos);
  CHECK(msg.find("refused LOAD") != std::string::npos);

  msg = failure(xa.fetch("127.0.0.1", xb.port(), "C"), nixl::status::not_found);
  CHECK(msg.find("serves agent 'B', not 'C'") != std::string::npos);
  CHECK_FALSE(a.has("B"));

  msg = failure(xa.invalidate_at("127.0.0.1", xb.port()), nixl::status::not_found);
  CHECK(msg.find("'A' not loaded") != std::string::npos);
}

TEST_CASE("fetch from a missing or silent peer fails with a clear error", "[metadata][p2p]") {
  fake_agent a("A");
  auto cfg = listening();
  cfg.io_timeout = 300ms;
  exchange xa("A", cfg, a.hooks());

  SECTION("nobody listens") {
    // Bind a port and close it again so that nobody listens there.
    std::uint16_t port = closed_port();
    auto msg = failure(xa.fetch("127.0.0.1", port, "B"), nixl::status::remote_disconnect);
    INFO(msg);
    CHECK(msg.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
    CHECK(msg.find("refused") != std::string::npos);
    CHECK(msg.find("enable_listen_thread") != std::string::npos);
  }
  SECTION("the peer accepts but never answers") {
    std::uint16_t port = 0;
    int fd = loopback_socket(port, 4);  // listens, never accepts
    auto t0 = std::chrono::steady_clock::now();
    auto msg = failure(xa.fetch("127.0.0.1", port, "B"), nixl::status::remote_disconnect);
    auto took = std::chrono::steady_clock::now() - t0;
    INFO(msg);
    CHECK(msg.find("no reply within 300 ms") != std::string::npos);
    CHECK(took < 3s);
    ::close(fd);
  }
  SECTION("a bad address is refused on the caller's thread") {
    CHECK_THROWS_AS(xa.fetch("not an address!", 1, "B"), nixl::error);
  }
}

TEST_CASE("without threads, requests run on the caller's thread", "[metadata][p2p]") {
  fake_agent a("A"), b("B");
  nixl::metadata::config quiet;
  quiet.read_env = false;
  REQUIRE_FALSE(quiet.runs_threads());
  exchange xa("A", quiet, a.hooks());
  exchange xb("B", listening(), b.hooks());
  CHECK_FALSE(xa.runs_threads());
  CHECK(xa.port() == 0);

  auto f = xa.send("127.0.0.1", xb.port(), a.blob());
  CHECK(f.wait_for(0s) == std::future_status::ready);
  f.get();
  CHECK(b.has("A"));
  auto g = xa.fetch("127.0.0.1", xb.port(), "B");
  CHECK(g.wait_for(0s) == std::future_status::ready);
  g.get();
  CHECK(a.has("B"));
}

TEST_CASE("1000 malformed frames leave the listener serving", "[metadata][p2p][robustness]") {
  // 125 refused blobs would each log a warning.
  auto level =
      nixl::log::enabled(nixl::log::level::info) ? nixl::log::level::info : nixl::log::level::warn;
  nixl::log::set_level(nixl::log::level::error);
  struct restore {
    nixl::log::level l;
    ~restore() { nixl::log::set_level(l); }
  } restore_level{level};
  fake_agent a("A"), b("B");
  auto cfg = listening();
  cfg.io_timeout = 500ms;
  cfg.max_frame = 1 << 20;
  exchange xb("B", cfg, b.hooks());
  exchange xa("A", listening(), a.hooks());
  const auto port = xb.port();

  std::mt19937 rng(7);
  auto random_bytes = [&](std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  const std::string good = nixl::metadata::encode_frame(nixl::metadata::frame_type::load, a.blob());
  int sent = 0;
  for (int i = 0; i < 1000; ++i) {
    raw_client c(port);
    std::string bad;
    switch (i % 8) {
      case 0:
        bad = "G" + random_bytes(1 + rng() % 200);
        break;  // garbage
      case 1:
        bad = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        break;
      case 2:
        bad = std::string("NX\x01\x01\xff\xff\xff\x7f", 8);
        break;  // oversized
      case 3:
        bad = good.substr(0, 8 + rng() % (good.size() - 9));
        break;  // truncated
      case 4:
        bad = std::string("NX\x09\x01\x00\x00\x00\x00", 8);
        break;  // bad version
      case 5:
        bad = std::string("NX\x01\x2a\x00\x00\x00\x00", 8);
        break;  // unknown type
      case 6:
        bad = nixl::metadata::encode_frame(nixl::metadata::frame_type::ack, "");
        break;  // reply as request
      case 7:
        bad = nixl::metadata::encode_frame(nixl::metadata::frame_type::load, "MD-broken");
        break;
    }
    c.write(bad);
    ++sent;
    if (i % 8 == 3) continue;  // hang up mid-frame
    if (i % 8 == 7) {
      // A well-framed but unloadable blob: refused with an error frame, connection kept.
      nixl::metadata::frame_decoder d;
      std::string got;
      char buf[256];
      nixl::metadata::frame f;
      while (d.next(f) != nixl::metadata::frame_decoder::result::frame) {
        ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        REQUIRE(n > 0);
        d.append(std::string_view(buf, static_cast<std::size_t>(n)));
      }
      CHECK(f.type == nixl::metadata::frame_type::error);
      continue;
    }
    // Everything else makes the listener close that connection (it may send an error first).
    c.read_to_close();
  }
  CHECK(sent == 1000);
  // A silent client and a slow one are dropped after io_timeout.
  raw_client silent(port), slow(port);
  slow.write(good.substr(0, 5));
  CHECK(silent.closed_by_peer());
  CHECK(slow.closed_by_peer());

  // Still serving.
  xa.send("127.0.0.1", port, a.blob()).get();
  xa.fetch("127.0.0.1", port, "B").get();
  CHECK(b.has("A"));
  CHECK(a.has("B"));
  auto st = xb.stats();
  INFO("accepted " << st.accepted << " rejected " << st.rejected << " timed out " << st.timed_out);
  CHECK(st.rejected >= 750);
  CHECK(st.timed_out >= 2);
}

TEST_CASE("eight exchanges fetch each other concurrently", "[metadata][p2p]") {
  constexpr int n = 8;
  std::vector<std::unique_ptr<fake_agent>> agents;
  std::vector<std::unique_ptr<exchange>> xs;
  for (int i = 0; i < n; ++i) {
    agents.push_back(std::make_unique<fake_agent>("agent-" + std::to_string(i)));
    xs.push_back(std::make_unique<exchange>(agents[i]->name, listening(), agents[i]->hooks()));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      std::vector<std::future<void>> fs;
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        fs.push_back(xs[i]->fetch("127.0.0.1", xs[j]->port(), agents[j]->name));
        fs.push_back(xs[i]->send("127.0.0.1", xs[j]->port(), agents[i]->blob()));
      }
      for (auto& f : fs) f.get();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) CHECK(agents[i]->has(agents[j]->name));
}

TEST_CASE("a frame above max_frame is refused", "[metadata][p2p]") {
  fake_agent a("A"), b("B");
  auto cfg = listening();
  cfg.max_frame = 1024;
  exchange xb("B", cfg, b.hooks());
  exchange xa("A", listening(), a.hooks());
  auto f = xa.send("127.0.0.1", xb.port(), "MD:A:" + std::string(4096, 'x'));
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(f.get(), nixl::error);
  CHECK_FALSE(b.has("A"));
  xa.send("127.0.0.1", xb.port(), a.blob()).get();
  CHECK(b.has("A"));
}

TEST_CASE("listener setup errors", "[metadata][p2p]") {
  fake_agent a("A"), b("B");
  exchange xa("A", listening(), a.hooks());
  auto cfg = listening();
  cfg.listen_port = xa.port();
  try {
    exchange xb("B", cfg, b.hooks());
    FAIL("bound a port in use");
  } catch (const nixl::error& e) {
    CHECK(std::string(e.what()).find("bind(127.0.0.1:" + std::to_string(xa.port()) + ")") !=
          std::string::npos);
  }
  CHECK_THROWS_AS(exchange("B", listening(), nixl::metadata::hooks{}), nixl::error);
}

TEST_CASE("a client that sends requests without reading replies is held back, then dropped",
          "[metadata][p2p][robustness]") {
  fake_agent a("A"), b("B");
  b.payload = std::string(64 * 1024, 'm');  // big replies fill the socket buffers quickly
  auto cfg = listening();
  cfg.io_timeout = 700ms;
  exchange xb("B", cfg, b.hooks());
  exchange xa("A", listening(), a.hooks());
  raw_client flood(xb.port());
  std::string frames;
  for (int i = 0; i < 1000; ++i)
    nixl::metadata::append_frame(frames, nixl::metadata::frame_type::fetch, "B");
  flood.write(frames);
  std::this_thread::sleep_for(200ms);
  // Replies stop once the client's socket is full: far fewer than 1000 were produced.
  auto served = xb.stats().served;
  CHECK(served < 500);
  // Others are served meanwhile.
  xa.fetch("127.0.0.1", xb.port(), "B").get();
  CHECK(a.value("B") == b.blob());
  // The stalled client is cut off after io_timeout.
  REQUIRE(eventually([&] { return xb.stats().timed_out >= 1; }, 3s));
  CHECK(xb.stats().served < served + 10);
}
