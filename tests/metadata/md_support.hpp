#pragma once
// Helpers of the metadata tests: a fake agent behind the exchange hooks, waiting, and a
// throw-away etcd server.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nixl/metadata/exchange.hpp>
#include <nixl/status.hpp>

namespace md_test {

using namespace std::chrono_literals;

/// Stores what peers load into it; its own metadata is "MD:<name>:<payload>".
struct fake_agent {
  std::string name;
  std::string payload = "payload";
  mutable std::mutex m;
  std::map<std::string, std::string, std::less<>> loaded;
  std::vector<std::string> invalidated;
  int loads = 0;

  explicit fake_agent(std::string n) : name(std::move(n)) {}

  std::string blob() const { return "MD:" + name + ":" + payload; }

  nixl::metadata::hooks hooks() {
    return {
        [this] { return blob(); },
        [this](std::span<const std::byte> b) {
          std::string s(reinterpret_cast<const char*>(b.data()), b.size());
          if (s.rfind("MD:", 0) != 0) nixl::raise(nixl::status::mismatch, "fake: not metadata");
          auto end = s.find(':', 3);
          if (end == std::string::npos) nixl::raise(nixl::status::mismatch, "fake: no name");
          std::string who = s.substr(3, end - 3);
          std::lock_guard lk(m);
          loaded[who] = s;
          ++loads;
          return who;
        },
        [this](std::string_view who) {
          std::lock_guard lk(m);
          if (loaded.erase(std::string(who)) == 0)
            nixl::raise(nixl::status::not_found, "fake: '{}' not loaded", who);
          invalidated.emplace_back(who);
        },
    };
  }

  bool has(std::string_view who) const {
    std::lock_guard lk(m);
    return loaded.find(who) != loaded.end();
  }
  std::string value(std::string_view who) const {
    std::lock_guard lk(m);
    auto it = loaded.find(who);
    return it == loaded.end() ? std::string() : it->second;
  }
  bool was_invalidated(std::string_view who) const {
    std::lock_guard lk(m);
    for (auto& i : invalidated)
      if (i == who) return true;
    return false;
  }
};

/// Polls `pred` until it holds or `limit` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

/// A config listening on an OS-picked loopback port, with etcd off unless given.
inline nixl::metadata::config listening(std::string address = "127.0.0.1") {
  nixl::metadata::config c;
  c.listen = true;
  c.listen_address = std::move(address);
  c.listen_port = 0;
  c.read_env = false;
  return c;
}

/// Tests choose their etcd explicitly: an NIXL_ETCD_ENDPOINTS from the environment would give
/// every agent a central store (and etcd threads). It is moved to NIXL_TEST_ETCD_ENDPOINTS, so
/// the etcd tests still use it, before any test runs.
inline const bool environment_scrubbed = [] {
  if (const char* e = std::getenv("NIXL_ETCD_ENDPOINTS"); e && *e) {
    ::setenv("NIXL_TEST_ETCD_ENDPOINTS", e, 0);
  }
  ::unsetenv("NIXL_ETCD_ENDPOINTS");
  ::unsetenv("NIXL_ETCD_NAMESPACE");
  return true;
}();

/// A throw-away etcd of scripts/etcd-test-server.sh: loopback, free ports, its own data dir.
/// endpoint() is empty when it could not start (why_absent() says why). halt() stops the
/// server and keeps its data and ports; resume() starts it again at the same URL.
class etcd_process {
 public:
  etcd_process() {
    char tmpl[] = "/tmp/nixl-etcd-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      why_ = "mkdtemp failed";
      return;
    }
    top_ = tmpl;
    dir_ = top_ + "/srv";
    const int rc = script("start", " > " + top_ + "/start.out 2>&1");
    if (rc == 0) {
      if (FILE* f = std::fopen((dir_ + "/endpoint").c_str(), "r")) {
        char buf[256] = {};
        if (std::fgets(buf, sizeof buf, f)) endpoint_ = buf;
        std::fclose(f);
        while (!endpoint_.empty() && (endpoint_.back() == '\n' || endpoint_.back() == ' '))
          endpoint_.pop_back();
      }
    } else if (rc == 77) {
      why_ = "no etcd binary (install etcd-server)";
    } else {
      why_ = "etcd did not start (see scripts/etcd-test-server.sh)";
    }
  }
  ~etcd_process() {
    if (top_.empty()) return;
    script("stop", " >/dev/null 2>&1");
    std::remove((top_ + "/start.out").c_str());
    ::rmdir(top_.c_str());
  }
  etcd_process(const etcd_process&) = delete;
  etcd_process& operator=(const etcd_process&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& why_absent() const { return why_; }
  bool halt() { return script("halt", " >/dev/null 2>&1") == 0; }
  bool resume() { return script("resume", " >/dev/null 2>&1") == 0; }

 private:
  int script(const char* cmd, const std::string& redirect) {
    std::string line = std::string(NIXL_ETCD_TEST_SCRIPT) + " " + cmd + " " + dir_ + redirect;
    const int rc = std::system(line.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }
  std::string top_, dir_, endpoint_, why_;
};

/// One etcd for the whole test process: NIXL_TEST_ETCD_ENDPOINTS if set, else an
/// etcd_process. endpoint() is empty when neither is available (tests skip).
class etcd_server {
 public:
  static etcd_server& get() {
    static etcd_server s;
    return s;
  }
  const std::string& endpoint() const { return own_ ? own_->endpoint() : given_; }
  const std::string& why_absent() const {
    static const std::string none;
    return own_ ? own_->why_absent() : none;
  }

 private:
  etcd_server() {
    if (const char* e = std::getenv("NIXL_TEST_ETCD_ENDPOINTS"); e && *e)
      given_ = e;
    else
      own_ = std::make_unique<etcd_process>();
  }
  std::string given_;
  std::unique_ptr<etcd_process> own_;
};

/// Config of an exchange that uses the test etcd under a namespace of its own.
inline nixl::metadata::config with_etcd(std::string ns, bool listen = false) {
  nixl::metadata::config c;
  c.listen = listen;
  c.listen_port = 0;
  c.read_env = false;
  c.etcd_endpoints = etcd_server::get().endpoint();
  c.etcd_namespace = std::move(ns);
  c.etcd_lease_ttl = 2s;
  c.etcd_watch_timeout = 3s;
  return c;
}

/// Unique namespace per test run.
inline std::string fresh_namespace(std::string_view tag) {
  static int n = 0;
  return "/nixl-test/" + std::to_string(::getpid()) + "-" + std::to_string(++n) + "-" +
         std::string(tag);
}

/// A socket bound to a free loopback port; listening when `backlog` > 0.
inline int loopback_socket(std::uint16_t& port, int backlog) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      (backlog > 0 && ::listen(fd, backlog) != 0))
    throw std::runtime_error("cannot bind a loopback socket");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

/// A port nobody listens on (bound, then closed).
inline std::uint16_t closed_port() {
  std::uint16_t port = 0;
  ::close(loopback_socket(port, 0));
  return port;
}

}  // namespace md_test

#define NIXL_REQUIRE_ETCD()                                                  \
  do {                                                                       \
    if (md_test::etcd_server::get().endpoint().empty())                      \
      NIXL_SKIP("etcd tests: " << md_test::etcd_server::get().why_absent()); \
  } while (0)
