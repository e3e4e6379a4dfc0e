#pragma once
// The peer helper of a multi-process test: a child process driven over its stdin/stdout (one
// command a line, replies a line each), the FNV-1a hash both sides compare buffers with, and the
// bytes of a string.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace nixl::test {

inline std::span<const std::byte> bytes_of(const std::string& s) noexcept {
  return std::as_bytes(std::span(s.data(), s.size()));
}

inline std::uint64_t fnv(const void* p, std::size_t n) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

/// How a peer helper starts and ends: `launcher_env` names an environment variable whose words
/// go before the helper (e.g. "ip netns exec ns1 unshare --pid --fork --kill-child" to run it as
/// if on another host, docs/ucx.md); `quit` is the command that asks it to leave (empty: it is
/// killed at once when the object goes).
struct peer_options {
  const char* launcher_env = nullptr;
  std::string quit = "QUIT";
};

/// A child process running the target helper, driven over its stdin/stdout.
class peer_process {
 public:
  peer_process(const std::string& exe, std::vector<std::string> args, peer_options o = {})
      : quit_(std::move(o.quit)) {
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
      std::vector<std::string> words;
      if (const char* l = o.launcher_env ? std::getenv(o.launcher_env) : nullptr) {
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
    // "MD <len> [<addr>]\n" + metadata
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
      if (alive_ && quit_.empty()) {
        kill();
      } else if (alive_) {
        try {
          send(quit_);
        } catch (const std::exception&) {
        }
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
          remove_shm_of(pid_);
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
  /// Kills the process with SIGKILL and reaps it, then removes the shared-memory files it could
  /// not (the LIBFABRIC backend's shm regions are named `nixl_<pid>_...`).
  void kill() {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    alive_ = false;
    remove_shm_of(pid_);
  }
  static void remove_shm_of(pid_t pid) noexcept {
    std::error_code ec;
    const std::string prefix = "nixl_" + std::to_string(pid) + "_";
    std::vector<std::filesystem::path> mine;
    for (std::filesystem::directory_iterator it("/dev/shm", ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->path().filename().string().rfind(prefix, 0) == 0) mine.push_back(it->path());
    }
    for (const auto& f : mine) std::filesystem::remove(f, ec);
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
  std::string quit_;
  std::string metadata_;
  std::uintptr_t remote_addr_ = 0;
};

}  // namespace nixl::test
