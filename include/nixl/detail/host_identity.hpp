#pragma once
/// Identity of this host and of this process, for the backends' connection info: a backend
/// compares its own identity with a peer's to choose same-process paths (plain pointers),
/// same-host paths (shared memory, IPC handles, watching the peer's pid) or the network.
///
/// Same kernel is not same host: containers and the sandbox hosts of tests/multihost share the
/// boot id of one kernel. Shared memory and a usable pid need the same PID and IPC namespaces;
/// another network namespace is another host to the network. So `same_host` is the same boot id
/// and the same PID, IPC and network namespaces.
///
/// Linux only (/proc). Where /proc/sys/kernel/random/boot_id cannot be read, the boot id is
/// "hostname:" and a hash of the host name: that tells hosts apart but does not prove that two
/// processes share one, so `same_host` is then true only within one process.

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <nixl/detail/codec.hpp>
#include <nixl/detail/fnv1a.hpp>
#include <nixl/detail/unique_fd.hpp>

namespace nixl::detail {

/// Up to `max` bytes of a small file (/proc, /sys); "" when it cannot be read.
inline std::string read_small_file(const char* path, std::size_t max = 4096) {
  const unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string out(max, '\0');
  std::size_t got = 0;
  while (got < max) {
    const ssize_t n = ::read(fd.get(), out.data() + got, max - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

/// Field 22 of /proc/<pid>/stat: the start time of process `pid` in clock ticks since boot.
/// With the pid it names one process of a boot (a recycled pid has another start time).
/// 0 when unreadable (no such process, /proc hidden).
inline std::uint64_t process_start_time(std::uint32_t pid) {
  const std::string stat = read_small_file(fmt::format("/proc/{}/stat", pid).c_str());
  // field 2, the command name, is in parentheses and may itself contain spaces and parentheses
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::string_view rest = std::string_view(stat).substr(close + 1);
  for (int field = 3; field <= 22; ++field) {
    const auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return 0;
    rest.remove_prefix(start);
    const auto end = std::min(rest.find(' '), rest.size());
    if (field == 22) {
      std::uint64_t v = 0;
      const auto [p, ec] = std::from_chars(rest.data(), rest.data() + end, v);
      return ec == std::errc{} && p == rest.data() + end ? v : 0;
    }
    rest.remove_prefix(end);
  }
  return 0;
}

/// Inode of one of this process's namespaces ("pid", "ipc", "net"); 0 when unreadable.
inline std::uint64_t namespace_inode(std::string_view which) {
  struct stat st {};
  return ::stat(fmt::format("/proc/self/ns/{}", which).c_str(), &st) == 0
             ? static_cast<std::uint64_t>(st.st_ino)
             : 0;
}

/// The kernel's boot id ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"), or "hostname:<16 hex
/// digits>" where it cannot be read.
inline std::string read_boot_id() {
  std::string id = read_small_file("/proc/sys/kernel/random/boot_id", 64);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (!id.empty()) return id;
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  return fmt::format("hostname:{:016x}", fnv1a(host));
}

struct host_identity {
  static constexpr std::size_t max_boot_id = 64;
  static constexpr std::size_t max_hostname = 255;

  std::string boot_id;
  std::string hostname;  // for messages only: names are not unique
  std::uint64_t pid_ns = 0;
  std::uint64_t ipc_ns = 0;
  std::uint64_t net_ns = 0;
  std::uint32_t pid = 0;
  std::uint64_t start_time = 0;  // process_start_time(pid)
  /// Random, drawn once per process image: a pid and start time survive exec(), the agents
  /// and memory of the process before it do not.
  std::uint64_t token = 0;

  bool operator==(const host_identity&) const = default;

  /// Whether the boot id came from the kernel (not the host-name fallback).
  bool boot_id_from_kernel() const noexcept {
    return !boot_id.empty() && !boot_id.starts_with("hostname:");
  }

  /// This process, read once per process (again in the child after fork()).
  static const host_identity& self();

  /// Reads this process's identity now, with a new token.
  static host_identity read_now() {
    host_identity me;
    me.boot_id = read_boot_id();
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) me.hostname = host;
    me.pid_ns = namespace_inode("pid");
    me.ipc_ns = namespace_inode("ipc");
    me.net_ns = namespace_inode("net");
    me.pid = static_cast<std::uint32_t>(::getpid());
    me.start_time = process_start_time(me.pid);
    if (::getrandom(&me.token, sizeof(me.token), GRND_NONBLOCK) != sizeof(me.token))
      me.token = fnv1a(fmt::format("{}:{}:{}", me.boot_id, me.pid,
                                   std::chrono::steady_clock::now().time_since_epoch().count()));
    if (me.token == 0) me.token = 1;
    return me;
  }

  void encode(writer& w) const {
    w.bytes(boot_id);
    w.bytes(hostname);
    w.u64(pid_ns);
    w.u64(ipc_ns);
    w.u64(net_ns);
    w.u32(pid);
    w.u64(start_time);
    w.u64(token);
  }

  /// Reads what `encode` wrote; throws `nixl::error(mismatch)` on bad input.
  static host_identity decode(reader& r) {
    host_identity id;
    id.boot_id = std::string(r.bytes("boot id", max_boot_id));
    id.hostname = std::string(r.bytes("host name", max_hostname));
    id.pid_ns = r.u64("pid namespace");
    id.ipc_ns = r.u64("ipc namespace");
    id.net_ns = r.u64("net namespace");
    id.pid = r.u32("pid");
    id.start_time = r.u64("start time");
    id.token = r.u64("process token");
    if (id.boot_id.empty()) r.fail("host identity: empty boot id");
    return id;
  }
};

/// One process image: the same token, pid and boot.
inline bool same_process(const host_identity& a, const host_identity& b) noexcept {
  return a.token == b.token && a.pid == b.pid && a.boot_id == b.boot_id;
}

/// One kernel boot and the same PID, IPC and network namespaces (or one process).
inline bool same_host(const host_identity& a, const host_identity& b) noexcept {
  if (same_process(a, b)) return true;
  return a.boot_id_from_kernel() && a.boot_id == b.boot_id && a.pid_ns == b.pid_ns &&
         a.ipc_ns == b.ipc_ns && a.net_ns == b.net_ns;
}

inline const host_identity& host_identity::self() {
  // A list that only grows, one entry per process image that asked (a child after fork()
  // reads its own): a reference handed out stays valid, and nothing locks, so a fork() while
  // another thread reads cannot leave a lock held in the child.
  struct node {
    host_identity id;
    const node* prev;
  };
  static std::atomic<const node*> head{nullptr};
  const auto pid = static_cast<std::uint32_t>(::getpid());
  const node* h = head.load(std::memory_order_acquire);
  if (h != nullptr && h->id.pid == pid) return h->id;
  auto* fresh = new node{read_now(), h};
  while (!head.compare_exchange_weak(h, fresh, std::memory_order_acq_rel)) {
    if (h != nullptr && h->id.pid == pid) {  // another thread was first
      delete fresh;
      return h->id;
    }
    fresh->prev = h;
  }
  return fresh->id;
}

}  // namespace nixl::detail
