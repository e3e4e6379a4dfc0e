#pragma once
// A second process of this test binary for the two-process cases: posix_spawn of
// /proc/self/exe running one hidden test case, with an environment variable naming its role,
// fd 3 the write end of a pipe to the parent, fd 4 the read end of one from it (closed by the
// parent to let the child end), and its stdout and stderr in a log file that the parent prints
// when something fails. Frames on the pipe are a u64 length (little-endian) and
// that many bytes. Every wait has a deadline; a child still running when its owner goes away is
// killed and reaped (no process outlives the test case).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace nixl_device_test {

using steady = std::chrono::steady_clock;

/// The fd a child writes its frames to.
inline constexpr int child_fd = 3;
/// The fd a child reads end-of-file from when the parent lets it go (child_process::let_go).
inline constexpr int go_fd = 4;
/// The largest frame a parent accepts (the bytes are the child's, hence untrusted).
inline constexpr std::uint64_t max_frame = 64u << 20;

/// Waits until `fd` is readable, by `deadline`: false when it is not, with `why` empty at the
/// deadline and the poll's error otherwise.
inline bool readable_by(int fd, steady::time_point deadline, std::string& why) {
  why.clear();
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
    if (left <= 0) return false;
    pollfd pf{fd, POLLIN, 0};
    const int pr = ::poll(&pf, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (pr > 0) return true;
    if (pr < 0 && errno != EINTR) {
      why = std::string("poll: ") + std::strerror(errno);
      return false;
    }
  }
}

/// Writes one frame to `fd`; false (with errno's text in `why`) when the pipe fails.
inline bool write_frame(int fd, std::string_view data, std::string& why) {
  std::string buf(8, '\0');
  std::uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  buf.append(data);
  std::size_t done = 0;
  while (done < buf.size()) {
    const ssize_t w = ::write(fd, buf.data() + done, buf.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      why = std::string("write to the parent's pipe: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<std::size_t>(w);
  }
  return true;
}

/// The environment variable that tells a child its parent's pid.
inline constexpr const char* parent_var = "NIXL_DEVICE_TEST_PARENT";

/// In a child: dies (SIGKILL) when the parent that started it goes away, so that a parent
/// killed by a timeout leaves no process behind; false when the parent is already gone.
inline bool die_with_parent() {
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char* p = std::getenv(parent_var);
  return p == nullptr || std::to_string(::getppid()) == p;
}

class child_process {
 public:
  /// Starts this binary running the test cases of `spec` (a hidden tag) with `env` added.
  /// Throws std::runtime_error naming the call that failed.
  child_process(const std::string& spec,
                const std::vector<std::pair<std::string, std::string>>& env) {
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) fail("readlink /proc/self/exe");
    exe[n] = '\0';
    exe_ = exe;
    char log[] = "/tmp/nixl-device-child-XXXXXX";
    const int logfd = high(::mkostemp(log, O_CLOEXEC));
    if (logfd < 0) fail("mkostemp");
    log_ = log;
    int p[2] = {-1, -1}, g[2] = {-1, -1};
    if (::pipe2(p, O_CLOEXEC) != 0 || ::pipe2(g, O_CLOEXEC) != 0) {
      const int e = errno;
      for (int fd : {logfd, p[0], p[1], g[0], g[1]})
        if (fd >= 0) ::close(fd);
      ::unlink(log);
      errno = e;
      fail("pipe2");
    }
    // Above the child's fds 0-4, so that no dup2 below overwrites a later one's source.
    rfd_ = p[0];
    p[1] = high(p[1]);
    g[0] = high(g[0]);
    wfd_ = g[1];
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view kv(*e);
      const std::string_view key = kv.substr(0, kv.find('='));
      bool ours = key == parent_var;  // getenv finds the first: ours must be the only ones
      for (const auto& [k, v] : env) ours = ours || key == k;
      if (!ours) vars.emplace_back(kv);
    }
    for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
    vars.push_back(std::string(parent_var) + "=" + std::to_string(::getpid()));
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::string a0 = exe_, a1 = spec;
    char* argv[] = {a0.data(), a1.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, logfd, 1);
    posix_spawn_file_actions_adddup2(&fa, logfd, 2);
    posix_spawn_file_actions_adddup2(&fa, p[1], child_fd);
    posix_spawn_file_actions_adddup2(&fa, g[0], go_fd);
    const int rc = ::posix_spawn(&pid_, exe_.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
    ::close(g[0]);
    ::close(logfd);
    if (rc != 0) {
      pid_ = -1;
      ::close(rfd_);
      let_go();
      ::unlink(log);
      errno = rc;
      fail("posix_spawn of " + exe_);
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Kills and reaps a child still running (and prints its output, since that is a failure
  /// path), then removes the log.
  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
      std::fprintf(stderr, "receiver process %d killed; its output:\n%s\n", static_cast<int>(pid_),
                   output().c_str());
    }
    if (rfd_ >= 0) ::close(rfd_);
    let_go();
    if (!log_.empty()) ::unlink(log_.c_str());
  }

  /// Reads one frame by `deadline`; false with the reason in `why`.
  bool read_frame(std::string& out, steady::time_point deadline, std::string& why) {
    unsigned char head[8];
    if (!read_all(head, sizeof head, deadline, why)) return false;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
    if (n > max_frame) {
      why = "the receiver sent a frame of " + std::to_string(n) + " bytes (limit " +
            std::to_string(max_frame) + ")";
      return false;
    }
    out.assign(static_cast<std::size_t>(n), '\0');
    return read_all(out.data(), out.size(), deadline, why);
  }

  /// Waits for the child to exit by `deadline`; true when it exited with status 0, else false
  /// with how it ended (or that it was killed at the deadline) in `why`.
  bool wait(steady::time_point deadline, std::string& why) {
    if (pid_ <= 0) {
      why = "no receiver process";
      return false;
    }
    for (;;) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return true;
        why = WIFEXITED(st) ? "the receiver exited with status " + std::to_string(WEXITSTATUS(st))
                            : std::string("the receiver was killed by signal ") +
                                  (WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "?");
        return false;
      }
      if (r < 0 && errno != EINTR) {
        why = std::string("waitpid: ") + std::strerror(errno);
        return false;
      }
      if (steady::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
        why = "the receiver did not exit by the deadline (killed)";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  /// Lets the child go: it reads end-of-file on go_fd (wait_let_go).
  void let_go() {
    if (wfd_ >= 0) ::close(wfd_);
    wfd_ = -1;
  }

  /// Whether the child is still running (not reaped).
  bool running() const { return pid_ > 0; }

  /// What the child wrote to its stdout and stderr so far.
  std::string output() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  /// `fd` moved to a number of 10 or more (close-on-exec); -1 stays -1.
  static int high(int fd) {
    if (fd < 0 || fd >= 10) return fd;
    const int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    ::close(fd);
    return h;
  }

  [[noreturn]] static void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
  }

  bool read_all(void* dst, std::size_t n, steady::time_point deadline, std::string& why) {
    auto* p = static_cast<unsigned char*>(dst);
    std::size_t got = 0;
    while (got < n) {
      if (!readable_by(rfd_, deadline, why)) {
        if (why.empty())
          why = "no frame from the receiver by the deadline (" + std::to_string(got) + " of " +
                std::to_string(n) + " bytes)";
        return false;
      }
      const ssize_t r = ::read(rfd_, p + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        why = std::string("read from the receiver's pipe: ") + std::strerror(errno);
        return false;
      }
      if (r == 0) {
        why = "the receiver closed its pipe after " + std::to_string(got) + " of " +
              std::to_string(n) + " bytes (it failed or exited early)";
        return false;
      }
      got += static_cast<std::size_t>(r);
    }
    return true;
  }

  std::string exe_, log_;
  pid_t pid_ = -1;
  int rfd_ = -1;
  int wfd_ = -1;
};

/// In a child: waits until the parent lets it go (end-of-file on go_fd) by `deadline`; false
/// with the reason in `why`.
inline bool wait_let_go(steady::time_point deadline, std::string& why) {
  for (;;) {
    if (!readable_by(go_fd, deadline, why)) {
      if (why.empty()) why = "the parent did not let this receiver go by the deadline";
      return false;
    }
    char c;
    const ssize_t r = ::read(go_fd, &c, 1);
    if (r == 0) return true;
    if (r < 0 && errno == EINTR) continue;
    why = r < 0 ? std::string("read: ") + std::strerror(errno) : "unexpected bytes from the parent";
    return false;
  }
}

}  // namespace nixl_device_test
