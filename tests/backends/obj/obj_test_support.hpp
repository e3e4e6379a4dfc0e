#pragma once
// What the object store tests share: a server (s3rver or azurite) started for the test on a free
// 127.0.0.1 port with its data in a temporary folder and stopped at the end, which can also be
// paused, killed and restarted on the same port; buffers with patterns; a bounded wait.

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/status.hpp>

#include "nixl_test/catch.hpp"

namespace obj_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// A server of `kind` ("s3" or "azure") from scripts/obj-test-server.sh. `endpoint()` is empty
/// when it could not start; `why()` says why.
class server {
 public:
  explicit server(std::string kind) : kind_(std::move(kind)) {
    std::string tmpl = (fs::temp_directory_path() / "nixl-obj-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      why_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    start("0");
  }
  ~server() {
    if (dir_.empty()) return;
    script("stop " + (dir_ / "srv").string());
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  server(const server&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& why() const { return why_; }
  /// The server's process id (0 when none).
  pid_t pid() const {
    std::ifstream f(dir_ / "srv" / "pid");
    long p = 0;
    f >> p;
    return static_cast<pid_t>(p);
  }
  /// Stops the process without closing its sockets: requests hang until their deadline.
  void pause() const { ::kill(pid(), SIGSTOP); }
  void resume() const { ::kill(pid(), SIGCONT); }
  /// Stops the server, keeps its data.
  void kill() const { script("kill " + (dir_ / "srv").string()); }
  /// Starts it again on the same port with the same data; true when it came up.
  bool restart() {
    const std::string port = endpoint_.substr(endpoint_.rfind(':') + 1);
    return start(port) && endpoint_.substr(endpoint_.rfind(':') + 1) == port;
  }

 private:
  static int script(const std::string& args, const std::string& out = "/dev/null") {
    const std::string cmd = std::string(NIXL_OBJ_TEST_SCRIPT) + " " + args + " >" + out + " 2>&1";
    return std::system(cmd.c_str());
  }
  bool start(const std::string& port) {
    const fs::path srv = dir_ / "srv";
    const int rc =
        script("start " + kind_ + " " + srv.string() + " " + port, (dir_ / "start.out").string());
    endpoint_.clear();
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 0) {
      std::ifstream f(srv / "endpoint");
      f >> endpoint_;
      return !endpoint_.empty();
    }
    std::ifstream f(dir_ / "start.out");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    why_ = (WIFEXITED(rc) && WEXITSTATUS(rc) == 77 ? "not installed: " : "did not start: ") + text;
    return false;
  }

  std::string kind_;
  fs::path dir_;
  std::string endpoint_, why_;
};

/// Bytes with a pattern from `seed`.
inline std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 g(seed);
  for (auto& b : v) b = static_cast<std::byte>(g() & 0xff);
  return v;
}

inline std::uintptr_t addr(const std::vector<std::byte>& v, std::size_t off = 0) {
  return reinterpret_cast<std::uintptr_t>(v.data() + off);
}

/// Polls a posted `req` (its post said `s`) to the end, for at most `limit`; `unknown` when the
/// limit passed.
template <class Req>
nixl::status finish(Req& req, nixl::status s, std::chrono::milliseconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (s == nixl::status::in_progress) {
    if (std::chrono::steady_clock::now() > end) return nixl::status::unknown;
    std::this_thread::sleep_for(200us);
    s = req.status();
  }
  return s;
}
/// Posts `req` and polls it to the end (finish).
template <class Req>
nixl::status run(Req& req, std::chrono::milliseconds limit = 60s) {
  return finish(req, req.post(), limit);
}

/// One agent with backend `B`, and calls that move buffers to and from keys.
template <class B>
struct agent_rig {
  nixl::agent<B> ag{"obj-test"};
  std::uint64_t next_dev = 1;

  explicit agent_rig(const nixl::params& p) { ag.template create_backend<B>(p); }

  /// Registers `keys` as objects (devs next_dev...) and returns their devs.
  std::vector<std::uint64_t> objects(const std::vector<std::string>& keys) {
    nixl::reg_list<nixl::object_t> l;
    std::vector<std::uint64_t> devs;
    for (const auto& k : keys) {
      devs.push_back(next_dev);
      l.push_back({{0, 0, next_dev++}, k});
    }
    ag.register_memory(l);
    return devs;
  }
  void memory(const std::vector<std::byte>& v) {
    ag.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(v), v.size(), 0}, ""}});
  }
  /// One request moving (buffer offset, object dev, object offset, length) pieces.
  struct piece {
    std::size_t mem_off;
    std::uint64_t dev;
    std::uint64_t obj_off;
    std::size_t len;
  };
  auto request(nixl::xfer_op op, const std::vector<std::byte>& buf,
               const std::vector<piece>& pieces) {
    nixl::xfer_list<nixl::dram_t> mem;
    nixl::xfer_list<nixl::object_t> obj;
    for (const auto& p : pieces) {
      mem.push_back({addr(buf, p.mem_off), p.len, 0});
      obj.push_back({p.obj_off, p.len, p.dev});
    }
    nixl::xfer_options o;
    o.skip_merge = true;
    return ag.create_request(op, mem, obj, ag.name(), o);
  }
  /// Writes all of `src` to object `dev`, then reads it back into `dst` (as long): both succeed
  /// and the bytes agree.
  void round_trip(const std::vector<std::byte>& src, std::vector<std::byte>& dst,
                  std::uint64_t dev) {
    auto w = request(nixl::xfer_op::write, src, {{0, dev, 0, src.size()}});
    REQUIRE(run(w) == nixl::status::success);
    auto rd = request(nixl::xfer_op::read, dst, {{0, dev, 0, dst.size()}});
    REQUIRE(run(rd) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), dst.size()) == 0);
  }
  template <class Req>
  std::string message(const Req& r) {
    return std::string(r.engine().error_message(r.backend_state()));
  }
};

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace obj_test

#define NIXL_REQUIRE_SERVER(srv)                                                     \
  do {                                                                               \
    if ((srv).endpoint().empty()) NIXL_SKIP("object store server: " << (srv).why()); \
  } while (0)
