#pragma once
/// Test double: an in-process backend that moves DRAM with memcpy between agents of one process.
/// Remote-capable (agents find each other through a process-wide registry), loopback-capable
/// and notifying. Parameter `delay_polls=N` makes each transfer report `in_progress` N times;
/// `delay_polls=-1` makes it never complete (a stalled transfer), and `cancel_refusals=N` makes
/// the release of such an in-flight transfer answer `repost_active` N times before it lets go.
/// Not a product backend.

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nixl/concepts.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::test {

class memcpy_backend {
 public:
  static constexpr std::string_view name = "MEMCPY";
  using memory_kinds = kind_list<dram_t>;

  struct config {
    int delay_polls = 0;  ///< -1: never complete
    int cancel_refusals = 0;
    static config from_params(const params& p) {
      config c;
      c.delay_polls = number(p, "delay_polls", -1);
      c.cancel_refusals = number(p, "cancel_refusals", 0);
      return c;
    }
    static int number(const params& p, const char* key, int least) {
      auto it = p.find(key);
      if (it == p.end()) return 0;
      int v = 0;
      try {
        v = std::stoi(it->second);
      } catch (...) {
        raise(status::invalid_param, "MEMCPY: {}='{}' is not a number", key, it->second);
      }
      if (v < least) raise(status::invalid_param, "MEMCPY: {}={} must be >= {}", key, v, least);
      return v;
    }
  };
  static params default_params() { return {{"delay_polls", "0"}}; }

  struct region {
    std::uintptr_t addr = 0;
  };
  struct remote_region {
    std::uintptr_t addr = 0;
  };
  struct peer {
    std::string target_id;
    std::string name;
  };
  struct op {
    std::uintptr_t local;
    std::uintptr_t remote;
    std::size_t len;
  };
  struct request {
    std::vector<op> ops;
    xfer_op dir = xfer_op::write;
    const peer* target = nullptr;
    int polls_left = 0;  ///< -1: never completes
    int refusals_left = 0;
    bool notify = false;
    std::string_view notif;  // points into the nixl::request's stored message
  };

  memcpy_backend(const config& c, const backend_context& ctx)
      : cfg_(c), agent_(ctx.agent_name), id_(agent_ + "#" + std::to_string(next_id()++)) {
    std::lock_guard g(registry_mutex());
    registry()[id_] = this;
  }
  ~memcpy_backend() {
    std::lock_guard g(registry_mutex());
    registry().erase(id_);
  }
  memcpy_backend(const memcpy_backend&) = delete;

  region register_region(mem_kind k, const reg_desc& d) {
    if (k != mem_kind::dram)
      raise(status::not_supported, "MEMCPY: register_region: {} memory is not supported", k);
    if (d.addr == 0) raise(status::invalid_param, "MEMCPY: register_region: null address");
    ++registered_;
    return {d.addr};
  }
  void deregister_region(region&) noexcept { --registered_; }

  void prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer& p) {
    r.ops.clear();
    r.ops.reserve(local.size());
    for (std::size_t i = 0; i < local.size(); ++i)
      r.ops.push_back({local[i].addr, remote[i].addr, local[i].len});
    r.dir = op;
    r.target = &p;
  }

  status post(request& r, notif_arg n) noexcept {
    r.notify = n.has_value();
    if (n) r.notif = *n;
    if (cfg_.delay_polls != 0) {
      r.polls_left = cfg_.delay_polls;
      r.refusals_left = cfg_.cancel_refusals;
      return status::in_progress;
    }
    return complete(r);
  }
  status check(request& r) noexcept {
    if (r.polls_left < 0) return status::in_progress;
    if (r.polls_left > 0 && --r.polls_left > 0) return status::in_progress;
    return complete(r);
  }
  /// Cancels a transfer in flight (counted by cancels()).
  status release(request& r) noexcept {
    if (r.polls_left != 0) {
      ++release_calls_;
      if (r.refusals_left > 0) {
        --r.refusals_left;
        return status::repost_active;
      }
      ++cancels_;
    }
    r.polls_left = 0;
    return status::success;
  }

  peer self_peer() { return {id_, agent_}; }
  remote_region load_local(const region& r) { return {r.addr}; }
  void unload_region(remote_region&) noexcept {}

  std::string connection_info() const { return id_; }
  peer load_peer(std::string_view agent, std::span<const std::byte> conn) {
    if (conn.empty() || conn.size() > 256)
      raise(status::mismatch, "MEMCPY: load_peer: connection info of {} bytes is invalid",
            conn.size());
    std::string id(reinterpret_cast<const char*>(conn.data()), conn.size());
    std::lock_guard g(registry_mutex());
    if (!registry().count(id))
      raise(status::not_found, "MEMCPY: load_peer: no backend '{}' in this process", id);
    return {id, std::string(agent)};
  }
  void unload_peer(peer&) noexcept {}
  std::string public_data(const region& r) const { return fmt::format("memcpy:{:x}", r.addr); }
  remote_region unpack(peer&, mem_kind k, const desc& d, std::span<const std::byte> data) {
    if (k != mem_kind::dram) raise(status::not_supported, "MEMCPY: unpack: {} memory", k);
    std::string expect = fmt::format("memcpy:{:x}", d.addr);
    if (data.size() != expect.size() || std::memcmp(data.data(), expect.data(), expect.size()) != 0)
      raise(status::mismatch, "MEMCPY: unpack: public data does not match the region");
    return {d.addr};
  }

  void notify(peer& p, std::string_view msg) {
    if (!deliver(p.target_id, msg))
      raise(status::remote_disconnect, "MEMCPY: notify: agent '{}' is gone", p.name);
  }
  void take_notifications(notif_map& out) {
    std::lock_guard g(notif_mutex_);
    for (auto& [from, msg] : inbox_) out[from].push_back(std::move(msg));
    inbox_.clear();
  }

  int registered() const noexcept { return registered_; }
  /// Transfers in flight whose release let go of them, and release calls on such transfers.
  int cancels() const noexcept { return cancels_; }
  int release_calls() const noexcept { return release_calls_; }

 private:
  status complete(request& r) noexcept {
    {
      std::lock_guard g(registry_mutex());
      if (!registry().count(r.target->target_id)) return status::remote_disconnect;
    }
    for (const auto& o : r.ops) {
      if (r.dir == xfer_op::write)
        std::memmove(reinterpret_cast<void*>(o.remote), reinterpret_cast<const void*>(o.local),
                     o.len);
      else
        std::memmove(reinterpret_cast<void*>(o.local), reinterpret_cast<const void*>(o.remote),
                     o.len);
    }
    if (r.notify) {
      try {
        if (!deliver(r.target->target_id, r.notif)) return status::remote_disconnect;
      } catch (...) {
        return status::backend;
      }
    }
    return status::success;
  }

  bool deliver(const std::string& target_id, std::string_view msg) {
    std::lock_guard g(registry_mutex());
    auto it = registry().find(target_id);
    if (it == registry().end()) return false;
    std::lock_guard g2(it->second->notif_mutex_);
    it->second->inbox_.emplace_back(agent_, std::string(msg));
    return true;
  }

  static std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
  }
  static std::unordered_map<std::string, memcpy_backend*>& registry() {
    static std::unordered_map<std::string, memcpy_backend*> r;
    return r;
  }
  static std::atomic<int>& next_id() {
    static std::atomic<int> n{0};
    return n;
  }

  config cfg_;
  std::string agent_;
  std::string id_;
  int registered_ = 0;
  int cancels_ = 0;
  int release_calls_ = 0;
  std::mutex notif_mutex_;
  std::vector<std::pair<std::string, std::string>> inbox_;
};

static_assert(backend<memcpy_backend>);
static_assert(loopback_backend<memcpy_backend>);
static_assert(remote_backend<memcpy_backend>);
static_assert(notifying_backend<memcpy_backend>);
static_assert(backend_for<memcpy_backend, dram_t, dram_t>);
static_assert(!backend_for<memcpy_backend, vram_t, dram_t>);

/// Test double: a loopback-only backend that moves DRAM <-> FILE with pread/pwrite (fd in dev).
class file_backend {
 public:
  static constexpr std::string_view name = "TESTFILE";
  using memory_kinds = kind_list<dram_t, file_t>;
  static constexpr bool can_move(mem_kind l, mem_kind r) noexcept {
    return l == mem_kind::dram && r == mem_kind::file;
  }
  struct config {
    static config from_params(const params&) { return {}; }
  };
  static params default_params() { return {}; }
  struct region {
    std::uint64_t dev = 0;
  };
  using remote_region = region;
  struct peer {};
  struct request {
    struct io {
      std::uintptr_t mem;
      std::uint64_t off;
      std::size_t len;
      int fd;
    };
    std::vector<io> ios;
    xfer_op dir = xfer_op::write;
  };
  file_backend(const config&, const backend_context&) {}
  region register_region(mem_kind, const reg_desc& d) { return {d.dev}; }
  void deregister_region(region&) noexcept {}
  void prepare(request& r, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer&);
  status post(request& r, notif_arg) noexcept;
  status check(request&) noexcept { return status::success; }
  status release(request&) noexcept { return status::success; }
  peer self_peer() { return {}; }
  remote_region load_local(const region& r) { return r; }
  void unload_region(remote_region&) noexcept {}
};

}  // namespace nixl::test

#include <unistd.h>

inline void nixl::test::file_backend::prepare(request& r, xfer_op op,
                                              std::span<const bound_desc<region>> local,
                                              std::span<const bound_desc<remote_region>> remote,
                                              peer&) {
  r.dir = op;
  r.ios.clear();
  for (std::size_t i = 0; i < local.size(); ++i)
    r.ios.push_back({local[i].addr, remote[i].addr, local[i].len, static_cast<int>(remote[i].dev)});
}

inline nixl::status nixl::test::file_backend::post(request& r, notif_arg) noexcept {
  for (const auto& io : r.ios) {
    auto n = r.dir == xfer_op::write ? ::pwrite(io.fd, reinterpret_cast<const void*>(io.mem),
                                                io.len, static_cast<off_t>(io.off))
                                     : ::pread(io.fd, reinterpret_cast<void*>(io.mem), io.len,
                                               static_cast<off_t>(io.off));
    if (n < 0 || static_cast<std::size_t>(n) != io.len) return status::backend;
  }
  return status::success;
}

static_assert(nixl::loopback_backend<nixl::test::file_backend>);
static_assert(!nixl::remote_backend<nixl::test::file_backend>);
static_assert(nixl::backend_for<nixl::test::file_backend, nixl::dram_t, nixl::file_t>);
static_assert(!nixl::backend_for<nixl::test::file_backend, nixl::dram_t, nixl::dram_t>);
