#pragma once
// Helpers of the UCX backend tests.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nixl/backends/ucx.hpp>
#include <nixl/status.hpp>

#include "nixl_test/errors.hpp"

namespace ucx_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

/// The largest transfer of the tests: 64 MiB, or 4 MiB under sanitizers (whose instrumented
/// byte loops would otherwise dominate the run).
inline constexpr std::size_t big = sanitized ? std::size_t{4} << 20 : std::size_t{64} << 20;

/// Page-aligned zeroed buffer.
class buffer {
 public:
  explicit buffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    if (::posix_memalign(&p, 4096, n == 0 ? 1 : n) != 0) throw std::bad_alloc();
    std::memset(p, 0, n);
    p_.reset(static_cast<std::byte*>(p));
  }
  std::byte* data() const noexcept { return p_.get(); }
  std::uintptr_t addr() const noexcept { return reinterpret_cast<std::uintptr_t>(p_.get()); }
  std::size_t size() const noexcept { return n_; }
  /// Byte i of pattern `seed`.
  static std::byte pattern(std::size_t i, unsigned seed) noexcept {
    return static_cast<std::byte>((i * 131u + seed * 7u + (i >> 12)) & 0xff);
  }
  void fill(unsigned seed, std::size_t off = 0, std::size_t len = SIZE_MAX) noexcept {
    len = std::min(len, n_ - off);
    for (std::size_t i = 0; i < len; ++i) p_.get()[off + i] = pattern(off + i, seed);
  }
  /// True when [off, off+len) holds pattern `seed` (indexed from `pat_off`).
  bool holds(unsigned seed, std::size_t off, std::size_t len, std::size_t pat_off) const noexcept {
    for (std::size_t i = 0; i < len; ++i)
      if (p_.get()[off + i] != pattern(pat_off + i, seed)) return false;
    return true;
  }

 private:
  struct freer {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, freer> p_;
  std::size_t n_;
};

using nixl::test::code_of;

/// Calls `poll()` until it returns something other than in_progress, or the time is up.
template <class Poll>
nixl::status wait_done(Poll&& poll, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  nixl::status s = poll();
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < deadline) s = poll();
  return s;
}

inline std::span<const std::byte> bytes_of(const std::string& s) noexcept {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace ucx_test

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>
#include <vector>

namespace ucx_test {

inline std::uint64_t fnv(const void* p, std::size_t n) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

/// A child process running the target helper, driven over its stdin/stdout.
class peer_process {
 public:
  peer_process(const std::string& exe, std::vector<std::string> args) {
    int in[2], out[2];
    ::signal(SIGPIPE, SIG_IGN);
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[0]);
      ::close(in[1]);
      ::close(out[0]);
      ::close(out[1]);
      // NIXL_UCX_PEER_LAUNCHER: words put before the helper, e.g. "ip netns exec ns1 unshare
      // --pid --fork --kill-child" to run it as if on another host (docs/ucx.md).
      std::vector<std::string> words;
      if (const char* l = std::getenv("NIXL_UCX_PEER_LAUNCHER")) {
        std::istringstream in(l);
        for (std::string w; in >> w;) words.push_back(w);
      }
      words.push_back(exe);
      for (auto& a : args) words.push_back(a);
      std::vector<char*> argv;
      for (auto& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    // "MD <len> <addr>\n" + metadata
    std::istringstream hdr(line());
    std::string tag;
    std::size_t n = 0;
    hdr >> tag >> n >> remote_addr_;
    if (tag != "MD") throw std::runtime_error("peer helper did not start: " + tag);
    metadata_.resize(n);
    read_exact(metadata_.data(), n);
  }
  ~peer_process() {
    if (pid_ > 0) {
      if (alive_) {
        send("QUIT");
        ::close(to_);
        to_ = -1;
        int st = 0;
        // a deadline in time (5 s) for the helper to leave, then SIGKILL
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (::waitpid(pid_, &st, WNOHANG) == 0 && std::chrono::steady_clock::now() < until)
          ::usleep(10000);
        if (::waitpid(pid_, &st, WNOHANG) == 0) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &st, 0);
        }
      }
    }
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
  }
  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;

  const std::string& metadata() const noexcept { return metadata_; }
  std::uintptr_t remote_addr() const noexcept { return remote_addr_; }
  pid_t pid() const noexcept { return pid_; }

  void send(const std::string& s) {
    std::string l = s + "\n";
    write_all(l.data(), l.size());
  }
  void send_blob(const std::string& b) { write_all(b.data(), b.size()); }
  /// Sends a command and returns the first reply line.
  std::string ask(const std::string& cmd) {
    send(cmd);
    return line();
  }
  std::string line() {
    std::string s;
    char c;
    for (;;) {
      const auto r = ::read(from_, &c, 1);
      if (r <= 0) throw std::runtime_error("peer helper closed its output");
      if (c == '\n') return s;
      s += c;
    }
  }
  /// Kills the process with SIGKILL and reaps it.
  void kill() {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    alive_ = false;
  }

 private:
  void write_all(const char* p, std::size_t n) {
    while (n > 0) {
      const auto w = ::write(to_, p, n);
      if (w <= 0) throw std::runtime_error("peer helper closed its input");
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  void read_exact(char* p, std::size_t n) {
    while (n > 0) {
      const auto r = ::read(from_, p, n);
      if (r <= 0) throw std::runtime_error("peer helper closed its output");
      p += r;
      n -= static_cast<std::size_t>(r);
    }
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool alive_ = true;
  std::string metadata_;
  std::uintptr_t remote_addr_ = 0;
};

inline std::string sum_cmd(std::size_t off, std::size_t len) {
  return fmt::format("SUM {} {}", off, len);
}
/// The peer's answer to sum_cmd when its range holds these bytes.
inline std::string sum_of(const void* p, std::size_t n) {
  return fmt::format("SUM {:x}", fnv(p, n));
}

/// The notifications the peer reports after waiting for `n`: (sender, message) pairs.
inline std::vector<std::pair<std::string, std::string>> target_notifs(peer_process& t,
                                                                      std::size_t n) {
  t.send(fmt::format("NOTIFS {} 20000", n));
  std::vector<std::pair<std::string, std::string>> out;
  for (;;) {
    std::istringstream in(t.line());
    std::string tag, from, h;
    in >> tag >> from >> h;
    if (tag == "END") return out;
    std::string msg;
    if (h != "-")
      for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        msg += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    out.emplace_back(from, msg);
  }
}

}  // namespace ucx_test
