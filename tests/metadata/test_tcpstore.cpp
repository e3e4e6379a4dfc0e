// The TCPStore central store against torch's own torch.distributed.TCPStore server (started by
// tests/metadata/tcpstore_server.py; the tests skip when torch is missing) and against a fake
// server that answers garbage.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nixl/metadata/exchange.hpp>
#include <nixl/metadata/tcpstore.hpp>

#include "md_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/wait.hpp"

namespace {

using namespace std::chrono_literals;
using md_test::closed_port;
using md_test::loopback_socket;
using nixl::status;
using nixl::metadata::tcpstore_client;
using nixl::test::code_of;
using nixl::test::wait_until;

/// torch's TCPStore in a child process on 127.0.0.1 (PORT 0: a free one, read back).
class torch_store {
 public:
  explicit torch_store(std::uint16_t port = 0) { start(port); }
  ~torch_store() { stop(); }
  torch_store(const torch_store&) = delete;
  torch_store& operator=(const torch_store&) = delete;

  bool running() const { return pid_ > 0 && port_ != 0; }
  const std::string& why_absent() const { return why_; }
  std::uint16_t port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  void stop() {
    if (pid_ <= 0) return;
    ::close(stdin_);
    ::kill(pid_, SIGTERM);
    int st = 0;
    bool reaped = wait_until([&] { return ::waitpid(pid_, &st, WNOHANG) == pid_; }, 10s);
    if (!reaped) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
    }
    pid_ = -1;
  }

  /// Starts again on the same port (after stop()).
  void restart() {
    std::uint16_t p = port_;
    start(p);
  }

 private:
  void start(std::uint16_t port) {
    port_ = 0;
    char tmpl[] = "/tmp/nixl-tcpstore-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      why_ = "mkdtemp failed";
      return;
    }
    const std::string port_file = std::string(tmpl) + "/port";
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      why_ = "pipe failed";
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[0], 0);
      const std::string p = std::to_string(port);
      const char* py = std::getenv("NIXL_TEST_PYTHON3");  // another python with torch
      if (py == nullptr || *py == '\0') py = NIXL_PYTHON3;
      const char* script = std::getenv("NIXL_TEST_TCPSTORE_SERVER");
      if (script == nullptr || *script == '\0') script = NIXL_TCPSTORE_TEST_SERVER;
      ::execl(py, py, script, port_file.c_str(), p.c_str(), static_cast<char*>(nullptr));
      ::_exit(4);
    }
    ::close(fds[0]);
    stdin_ = fds[1];
    int st = 0;
    bool up = wait_until(
        [&] {
          if (::waitpid(pid_, &st, WNOHANG) == pid_) return true;  // exited early
          std::ifstream f(port_file);
          unsigned v = 0;
          if (f >> v) port_ = static_cast<std::uint16_t>(v);
          return port_ != 0;
        },
        30s);
    if (port_ == 0) {
      if (up && WIFEXITED(st) && WEXITSTATUS(st) == 3)
        why_ = "torch.distributed is not installed for " NIXL_PYTHON3 " (or NIXL_TEST_PYTHON3)";
      else
        why_ = "the TCPStore server did not start (tests/metadata/tcpstore_server.py)";
      if (!up) ::kill(pid_, SIGKILL), ::waitpid(pid_, &st, 0);
      ::close(stdin_);
      pid_ = -1;
    }
  }

  pid_t pid_ = -1;
  int stdin_ = -1;
  std::uint16_t port_ = 0;
  std::string why_;
};

#define REQUIRE_TORCH(s)                                                   \
  do {                                                                     \
    if (!(s).running()) NIXL_SKIP("TCPStore tests: " << (s).why_absent()); \
  } while (0)

nixl::metadata::config with_tcpstore(const std::string& endpoint,
                                     std::chrono::milliseconds fetch_timeout = 5s) {
  nixl::metadata::config c;
  c.listen = false;
  c.read_env = false;
  c.tcpstore_endpoint = endpoint;
  c.tcpstore_timeout = fetch_timeout;
  c.tcpstore_op_timeout = 2s;
  return c;
}

/// The status a future ends with, or in_progress when it did not end within `limit`.
/// Its error message goes to `what` when given.
status outcome(std::future<void>& f, std::chrono::milliseconds limit = 15s,
               std::string* what = nullptr) {
  if (f.wait_for(limit) != std::future_status::ready) return status::in_progress;
  try {
    f.get();
  } catch (const nixl::error& e) {
    if (what) *what = e.what();
    return e.status_code();
  }
  return status::success;
}

/// The same for a future the test does not keep.
status outcome(std::future<void>&& f, std::chrono::milliseconds limit = 15s) {
  return outcome(f, limit);
}

/// Agents A and B on one store, fetches waiting up to `fetch_timeout`.
struct two_agents {
  md_test::fake_agent a{"A"}, b{"B"};
  nixl::metadata::exchange xa, xb;
  two_agents(const std::string& endpoint, std::chrono::milliseconds fetch_timeout)
      : xa("A", with_tcpstore(endpoint, fetch_timeout), a.hooks()),
        xb("B", with_tcpstore(endpoint, fetch_timeout), b.hooks()) {}
};

}  // namespace

TEST_CASE("TCPStore endpoint and keys as NIXL writes them", "[metadata][tcpstore]") {
  auto e = nixl::metadata::parse_tcpstore_endpoint("store.example:29500");
  CHECK(e.host == "store.example");
  CHECK(e.port == 29500);
  auto v6 = nixl::metadata::parse_tcpstore_endpoint("::1:1234");  // last ':' splits
  CHECK(v6.host == "::1");
  CHECK(v6.port == 1234);
  for (const char* bad :
       {"", "host", ":80", "host:", "host:0", "host:65536", "host:80x", "host:-1", "host: 80"}) {
    INFO(bad);
    CHECK(code_of([&] { nixl::metadata::parse_tcpstore_endpoint(bad); }) == status::invalid_param);
  }
  CHECK(nixl::metadata::tcpstore_key("metadata", "agentA") ==
        "nixl/agents/metadata/agentA/NULL_AGENT");
}

TEST_CASE("NIXL_TCPSTORE_* select the store; etcd and TCPStore exclude each other",
          "[metadata][tcpstore]") {
  md_test::fake_agent a("A");
  ::setenv("NIXL_TCPSTORE_ENDPOINT", "127.0.0.1:1", 1);
  ::setenv("NIXL_TCPSTORE_TIMEOUT_MS", "1234", 1);
  ::setenv("NIXL_TCPSTORE_OP_TIMEOUT_MS", "321", 1);
  nixl::metadata::config c;
  auto r = c.resolved();
  CHECK(r.tcpstore_endpoint == "127.0.0.1:1");
  CHECK(r.tcpstore_timeout == 1234ms);
  CHECK(r.tcpstore_op_timeout == 321ms);
  CHECK(c.runs_threads());
  {
    nixl::metadata::exchange x("A", c, a.hooks());
    CHECK(x.has_central());
    CHECK(x.central_key("B", "metadata") == "nixl/agents/metadata/B/NULL_AGENT");
  }
  ::setenv("NIXL_TCPSTORE_OP_TIMEOUT_MS", "soon", 1);
  CHECK(code_of([&] { (void)c.resolved(); }) == status::invalid_param);
  ::unsetenv("NIXL_TCPSTORE_OP_TIMEOUT_MS");
  ::unsetenv("NIXL_TCPSTORE_TIMEOUT_MS");
  ::setenv("NIXL_TCPSTORE_ENDPOINT", "127.0.0.1", 1);
  CHECK(code_of([&] { nixl::metadata::exchange x("A", c, a.hooks()); }) == status::invalid_param);
  ::unsetenv("NIXL_TCPSTORE_ENDPOINT");

  auto both = with_tcpstore("127.0.0.1:1");
  both.etcd_endpoints = "127.0.0.1:2";
  try {
    nixl::metadata::exchange x("A", both, a.hooks());
    FAIL("etcd and TCPStore together were accepted");
  } catch (const nixl::error& e) {
    CHECK(std::string(e.what()).find("mutually exclusive") != std::string::npos);
  }
}

TEST_CASE("TCPStore client against torch's server", "[metadata][tcpstore]") {
  torch_store srv;
  REQUIRE_TORCH(srv);
  tcpstore_client c(srv.endpoint(), 2s);
  // torch's own store.set("fromtorch") is "/fromtorch" on the wire, as our keys.
  auto t = c.get("fromtorch");
  REQUIRE(t.has_value());
  CHECK(*t == "hello from torch");
  CHECK(c.protocol() != tcpstore_client::dialect::unknown);
  CHECK_FALSE(c.get("nixl/none").has_value());
  CHECK_FALSE(c.check("nixl/none"));
  std::string big(1 << 20, 'x');
  big[7] = '\0';  // values are bytes
  c.set("nixl/k", big);
  CHECK(c.check("nixl/k"));
  CHECK(c.get("nixl/k") == big);
  c.set("nixl/k", "second");  // last writer wins
  CHECK(c.get("nixl/k") == "second");
  auto n = c.num_keys();
  CHECK(n >= 2);
  CHECK(c.remove("nixl/k"));
  CHECK_FALSE(c.remove("nixl/k"));
  CHECK(c.num_keys() == n - 1);
}

TEST_CASE("TCPStore: full and partial metadata between two agents", "[metadata][tcpstore]") {
  torch_store srv;
  REQUIRE_TORCH(srv);
  two_agents ab(srv.endpoint(), 2s);
  auto& [a, b, xa, xb] = ab;

  REQUIRE(outcome(xa.send_local_metadata()) == status::success);
  tcpstore_client raw(srv.endpoint(), 2s);
  CHECK(raw.get("nixl/agents/metadata/A/NULL_AGENT") == a.blob());

  auto f = xb.fetch_remote_metadata("A");
  REQUIRE(outcome(f) == status::success);
  CHECK(b.value("A") == a.blob());

  // Partial metadata needs a label and goes under it.
  CHECK(code_of([&] { (void)xa.send_partial_metadata({}, false, nixl::metadata::target{}); }) ==
        status::invalid_param);
  auto p = xa.publish("part", "MD:A:partial");
  REQUIRE(outcome(p) == status::success);
  CHECK(raw.get("nixl/agents/part/A/NULL_AGENT") == "MD:A:partial");
  auto fp = xb.fetch_remote_metadata("A", nixl::metadata::target::central("part"));
  REQUIRE(outcome(fp) == status::success);
  CHECK(b.value("A") == "MD:A:partial");

  // A fetch waits for a key published later.
  auto late = xa.fetch_remote_metadata("B");
  std::this_thread::sleep_for(100ms);
  auto sb = xb.send_local_metadata();
  REQUIRE(outcome(sb) == status::success);
  REQUIRE(outcome(late) == status::success);
  CHECK(a.value("B") == b.blob());

  // A key that holds another agent's metadata is refused.
  raw.set("nixl/agents/metadata/C/NULL_AGENT", b.blob());
  auto wrong = xa.fetch_remote_metadata("C");
  CHECK(outcome(wrong) == status::mismatch);

  // Invalidate deletes every key A published; peers are not told (no watch).
  auto inv = xa.invalidate_local_metadata();
  REQUIRE(outcome(inv) == status::success);
  CHECK_FALSE(raw.check("nixl/agents/metadata/A/NULL_AGENT"));
  CHECK_FALSE(raw.check("nixl/agents/part/A/NULL_AGENT"));
  CHECK(raw.check("nixl/agents/metadata/B/NULL_AGENT"));
  CHECK(b.has("A"));
  auto gone = xb.fetch_remote_metadata("A");
  CHECK(outcome(gone) == status::not_found);
}

TEST_CASE("TCPStore: eight agents fetch each other", "[metadata][tcpstore]") {
  torch_store srv;
  REQUIRE_TORCH(srv);
  constexpr int n = 8;
  std::vector<std::unique_ptr<md_test::fake_agent>> agents;
  std::vector<std::unique_ptr<nixl::metadata::exchange>> xs;
  for (int i = 0; i < n; ++i) {
    agents.push_back(std::make_unique<md_test::fake_agent>("agent" + std::to_string(i)));
    xs.push_back(std::make_unique<nixl::metadata::exchange>(
        agents.back()->name, with_tcpstore(srv.endpoint(), 10s), agents.back()->hooks()));
  }
  // Fetches first: they wait for the keys that follow.
  std::vector<std::future<void>> fetches;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) fetches.push_back(xs[i]->fetch_remote_metadata(agents[j]->name));
  std::vector<std::future<void>> sends;
  for (auto& x : xs) sends.push_back(x->send_local_metadata());
  for (auto& s : sends) REQUIRE(outcome(s) == status::success);
  for (auto& f : fetches) REQUIRE(outcome(f, 30s) == status::success);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) CHECK(agents[i]->value(agents[j]->name) == agents[j]->blob());
}

TEST_CASE("TCPStore restarted mid-run: clear failures, then it works again",
          "[metadata][tcpstore]") {
  torch_store srv;
  REQUIRE_TORCH(srv);
  two_agents ab(srv.endpoint(), 1s);
  auto& [a, b, xa, xb] = ab;
  REQUIRE(outcome(xa.send_local_metadata()) == status::success);

  srv.stop();
  auto down = xa.send_local_metadata();
  CHECK(outcome(down) == status::remote_disconnect);
  auto f = xb.fetch_remote_metadata("A");
  std::string why;
  REQUIRE(outcome(f, 15s, &why) == status::remote_disconnect);  // within the 1 s fetch budget
  CHECK(why.find("cannot connect") != std::string::npos);

  srv.restart();
  REQUIRE(srv.running());
  // The restarted store is empty: publish again, then fetch.
  auto again = xa.send_local_metadata();
  REQUIRE(outcome(again) == status::success);
  auto f2 = xb.fetch_remote_metadata("A");
  REQUIRE(outcome(f2) == status::success);
  CHECK(b.value("A") == a.blob());

  // A restart between requests on a kept connection is noticed before the next request.
  srv.stop();
  srv.restart();
  REQUIRE(srv.running());
  auto after = xb.send_local_metadata();
  REQUIRE(outcome(after) == status::success);
  tcpstore_client raw(srv.endpoint(), 2s);
  CHECK(raw.check("nixl/agents/metadata/B/NULL_AGENT"));
}

TEST_CASE("TCPStore that is not there: clear status within the op timeout",
          "[metadata][tcpstore]") {
  const std::string ep = "127.0.0.1:" + std::to_string(closed_port());
  tcpstore_client c(ep, 1s);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(code_of([&] { c.set("k", "v"); }) == status::remote_disconnect);
  CHECK(code_of([&] { (void)c.get("k"); }) == status::remote_disconnect);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  md_test::fake_agent a("A");
  nixl::metadata::exchange x("A", with_tcpstore(ep, 500ms), a.hooks());
  auto f = x.fetch_remote_metadata("B");
  CHECK(outcome(f) == status::remote_disconnect);
}

namespace {

/// A fake store speaking the current dialect (VALIDATE, PING, SET=1, GET=3, CHECK=5,
/// GETNUMKEYS=7, DELETE_KEY=8), one thread per connection. With `check_reply` / `get_reply`
/// set it answers every CHECK / GET with those raw bytes instead (and closes after a GET).
class fake_store {
 public:
  explicit fake_store(std::optional<std::string> check_reply = std::nullopt,
                      std::optional<std::string> get_reply = std::nullopt)
      : check_(std::move(check_reply)), get_(std::move(get_reply)) {
    fd_ = loopback_socket(port_, 16);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~fake_store() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    {
      std::lock_guard lk(m_);
      for (int c : clients_) ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : served_) t.join();
    for (int c : clients_) ::close(c);
    ::close(fd_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  static bool read_n(int c, void* p, std::size_t n) {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = ::recv(c, b, n, 0);
      if (r <= 0) return false;
      b += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }
  static bool read_string(int c, std::string& s) {
    std::uint64_t len = 0;
    if (!read_n(c, &len, 8) || len > (std::uint64_t{64} << 20)) return false;
    s.assign(len, '\0');
    return read_n(c, s.data(), len);
  }
  template <class T>
  static void reply(int c, T v) {
    ::send(c, &v, sizeof v, MSG_NOSIGNAL);
  }
  static void reply(int c, const std::string& raw) {
    ::send(c, raw.data(), raw.size(), MSG_NOSIGNAL);
  }
  void accept_loop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::lock_guard lk(m_);
      clients_.push_back(c);
      served_.emplace_back([this, c] { serve(c); });
    }
  }
  /// Handles one request; false closes the connection.
  bool request(int c) {
    std::uint8_t op = 0;
    std::string key, value;
    if (!read_n(c, &op, 1)) return false;
    switch (op) {
      case 0: {  // VALIDATE
        std::uint32_t magic = 0;
        return read_n(c, &magic, 4) && magic == 0x3C85F7CE;
      }
      case 13: {  // PING
        std::uint32_t nonce = 0;
        if (!read_n(c, &nonce, 4)) return false;
        reply(c, nonce);
        return true;
      }
      case 1:  // SET
        if (!read_string(c, key) || !read_string(c, value)) return false;
        {
          std::lock_guard lk(m_);
          kv_[key] = value;
        }
        return true;
      case 5: {  // CHECK
        std::uint64_t n = 0;
        if (!read_n(c, &n, 8) || n > 1000) return false;
        bool all = true;
        for (std::uint64_t i = 0; i < n; ++i) {
          if (!read_string(c, key)) return false;
          std::lock_guard lk(m_);
          all = all && kv_.count(key) > 0;
        }
        if (check_)
          reply(c, *check_);
        else
          reply(c, static_cast<std::uint8_t>(all ? 0 : 1));
        return true;
      }
      case 3:  // GET
        if (!read_string(c, key)) return false;
        if (get_) {
          reply(c, *get_);
          return false;
        }
        {
          std::lock_guard lk(m_);
          auto it = kv_.find(key);
          if (it == kv_.end()) return false;  // as the legacy server
          value = it->second;
        }
        reply(c, u64_of(value.size()) + value);
        return true;
      case 7: {  // GETNUMKEYS
        std::lock_guard lk(m_);
        reply(c, static_cast<std::int64_t>(kv_.size()));
        return true;
      }
      case 8: {  // DELETE_KEY
        if (!read_string(c, key)) return false;
        std::lock_guard lk(m_);
        reply(c, static_cast<std::int64_t>(kv_.erase(key)));
        return true;
      }
      default:
        return false;
    }
  }
  static std::string u64_of(std::uint64_t v) {
    return std::string(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void serve(int c) {
    timeval tv{5, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (!stop_ && request(c)) {
    }
    ::shutdown(c, SHUT_RDWR);
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::optional<std::string> check_, get_;
  std::mutex m_;
  std::map<std::string, std::string> kv_;
  std::vector<int> clients_;
  std::vector<std::thread> served_;
  std::thread thread_;
};

std::string u64(std::uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

TEST_CASE("TCPStore current dialect (VALIDATE/PING) against a fake store", "[metadata][tcpstore]") {
  fake_store srv;
  tcpstore_client c(srv.endpoint(), 2s);
  CHECK_FALSE(c.get("nixl/none").has_value());
  CHECK(c.protocol() == tcpstore_client::dialect::current);
  c.set("nixl/k", "v1");
  CHECK(c.get("nixl/k") == "v1");
  CHECK(c.num_keys() == 1);
  CHECK(c.remove("nixl/k"));
  CHECK_FALSE(c.remove("nixl/k"));

  two_agents ab(srv.endpoint(), 2s);
  auto s = ab.xa.send_local_metadata();
  REQUIRE(outcome(s) == status::success);
  auto f = ab.xb.fetch_remote_metadata("A");
  REQUIRE(outcome(f) == status::success);
  CHECK(ab.b.value("A") == ab.a.blob());
  auto inv = ab.xa.invalidate_local_metadata();
  REQUIRE(outcome(inv) == status::success);
  CHECK_FALSE(c.check("nixl/agents/metadata/A/NULL_AGENT"));
}

TEST_CASE("TCPStore answering garbage: clear errors, no crash", "[metadata][tcpstore]") {
  SECTION("a value length beyond the bound") {
    fake_store g(std::string(1, '\0'), u64(std::uint64_t{1} << 62));
    tcpstore_client c(g.endpoint(), 2s);
    try {
      (void)c.get("k");
      FAIL("accepted");
    } catch (const nixl::error& e) {
      CHECK(e.status_code() == status::mismatch);
      CHECK(std::string(e.what()).find("more than the") != std::string::npos);
    }
    CHECK_FALSE(c.connected());
    md_test::fake_agent a("A");
    nixl::metadata::exchange x("A", with_tcpstore(g.endpoint(), 500ms), a.hooks());
    auto f = x.fetch_remote_metadata("B");
    std::string why;
    CHECK(outcome(f, 15s, &why) == status::mismatch);  // the last probe's status
    CHECK(why.find("more than the") != std::string::npos);
  }
  SECTION("a truncated value") {
    fake_store g(std::string(1, '\0'), u64(100) + "abc");
    tcpstore_client c(g.endpoint(), 2s);
    CHECK(code_of([&] { (void)c.get("k"); }) == status::remote_disconnect);
  }
  SECTION("a large length within the bound, then a close") {
    fake_store g(std::string(1, '\0'), u64(std::uint64_t{1} << 29) + "abc");
    tcpstore_client c(g.endpoint(), 2s);
    CHECK(code_of([&] { (void)c.get("k"); }) == status::remote_disconnect);
  }
  SECTION("an unknown CHECK code") {
    fake_store g(std::string(1, '\x07'), {});
    tcpstore_client c(g.endpoint(), 2s);
    CHECK(code_of([&] { (void)c.check("k"); }) == status::mismatch);
  }
  SECTION("no reply at all") {
    fake_store g(std::string{}, std::string{});
    tcpstore_client c(g.endpoint(), 500ms);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(code_of([&] { (void)c.check("k"); }) == status::remote_disconnect);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  }
  SECTION("a value that is not metadata") {
    fake_store g(std::string(1, '\0'), u64(5) + "junk!");
    md_test::fake_agent a("A");
    nixl::metadata::exchange x("A", with_tcpstore(g.endpoint(), 2s), a.hooks());
    auto f = x.fetch_remote_metadata("B");
    CHECK(outcome(f) == status::mismatch);
  }
}
