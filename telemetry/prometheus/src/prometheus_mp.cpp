// The multi-process Prometheus exporter (NIXL_TELEMETRY_EXPORTER=prometheus_mp, NIXL's design):
// every agent writes its values into a store of its own, a fixed POD layout mmap'd from
// $NIXL_TELEMETRY_MULTIPROC_DIR and flock'ed for the writer's life; the one process holding the
// flock of nixl-owner.<address:port>.lock serves the port and, per scrape, reads every store
// and exports each agent of each process as its own series (labels pid, agent_instance and
// local_rank added). The others write only and try again to become the owner from their
// export path. Stores whose writer is gone are shown until their last update is older than
// NIXL_TELEMETRY_MP_STALE_TTL seconds, then removed.

#include <nixl/telemetry/prometheus.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

#include "exposition.hpp"

namespace nixl::prometheus::mp {
namespace {

constexpr std::uint64_t store_magic = 0x3153504d4c58494eull;  // "NIXLMPS1"
constexpr std::uint32_t store_schema = 1;
constexpr std::size_t max_bounds = 32;
// NIXL's store holds the 21 events of telemetry version 4; later events (agent_err_xfer_stalled)
// are not kept in it.
constexpr std::size_t slots = 21;
static_assert(slots <= telemetry_event_count);

/// One agent's store, as NIXL lays it out (6800 bytes; values updated with atomic builtins).
struct store {
  std::uint64_t magic;
  std::uint32_t schema;
  std::uint32_t slot_count;
  std::int64_t pid;
  std::uint64_t last_update_ns;  // CLOCK_MONOTONIC
  std::uint32_t instance;
  std::uint32_t bucket_count;
  std::uint64_t reserved;
  char agent_name[256];
  char hostname[128];
  char local_rank[64];
  double bounds[max_bounds];
  std::uint64_t counters[slots];
  std::uint64_t gauges[slots];
  std::uint64_t buckets[slots][max_bounds + 1];
  std::uint64_t sums[slots];
};
static_assert(sizeof(store) == 6800);
static_assert(std::is_trivially_copyable_v<store>);

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void copy_field(char* dst, std::size_t n, std::string_view v) noexcept {
  const auto k = std::min(n - 1, v.size());
  std::memcpy(dst, v.data(), k);
  dst[k] = '\0';
}

/// The process's side of the election and the scrape.
struct process_state {
  std::mutex m;
  std::string run_marker;
  std::uint32_t next_instance = 0;
  bool configured = false;
  std::string dir, host, lock_path;
  int port = 0;
  double ttl_s = 30;
  int lock_fd = -1;
  bool lock_usable = true;
  bool owner = false;
  int bound = 0;
  std::chrono::steady_clock::time_point next_try{};
  bool warned_bind = false;
};

process_state& the_state() {
  static auto* s = new process_state;
  return *s;
}

constexpr auto retry_every = std::chrono::milliseconds(500);
constexpr auto retry_foreign = std::chrono::seconds(5);

std::string render_dir();

/// One attempt to become the owner (state's lock held): the lock file's flock, then the port.
void try_elect(process_state& s) noexcept {
  if (s.owner || !s.configured) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < s.next_try) return;
  s.next_try = now + retry_every;
  try {
    bool locked = false;
    if (s.lock_usable && s.lock_fd < 0) {
      s.lock_fd = ::open(s.lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      struct stat st {};
      if (s.lock_fd < 0 || ::fstat(s.lock_fd, &st) != 0 || !S_ISREG(st.st_mode) ||
          st.st_uid != ::geteuid()) {
        log::warn(
            "telemetry: prometheus_mp: '{}' is not a regular file of this user; the port "
            "decides which process serves",
            s.lock_path);
        if (s.lock_fd >= 0) ::close(s.lock_fd);
        s.lock_fd = -1;
        s.lock_usable = false;
      }
    }
    if (s.lock_usable) {
      if (::flock(s.lock_fd, LOCK_EX | LOCK_NB) == 0) {
        locked = true;
      } else if (errno == EWOULDBLOCK) {
        return;  // another process is the owner
      } else {
        log::warn(
            "telemetry: prometheus_mp: flock of '{}' fails ({}); the port decides which "
            "process serves",
            s.lock_path, std::strerror(errno));
        s.lock_usable = false;
      }
    }
    const int bound = prometheus::detail::serve(s.host, s.port, [] { return render_dir(); });
    if (bound < 0) {
      if (locked) ::flock(s.lock_fd, LOCK_UN);
      s.next_try = now + retry_foreign;
      if (!s.warned_bind)
        log::warn(
            "telemetry: prometheus_mp: {}:{} is held by another program; this process "
            "writes its store only and tries again every {} s",
            s.host, s.port, retry_foreign.count());
      s.warned_bind = true;
      return;
    }
    s.owner = true;
    s.bound = bound;
    log::info("telemetry: prometheus_mp: process {} serves http://{}:{}/metrics for '{}'",
              ::getpid(), s.host, bound, s.dir);
  } catch (const std::exception& e) {
    log::warn("telemetry: prometheus_mp: election failed: {}", e.what());
  }
}

struct loaded {
  store st;
  prometheus::detail::agent_values values;
  std::string labels;
};

/// Every store of `dir` a scrape shows; removes those gone for longer than `ttl_s`.
std::vector<std::unique_ptr<loaded>> load_stores(const std::string& dir, double ttl_s) {
  std::vector<std::unique_ptr<loaded>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  const auto now = monotonic_ns();
  const auto ttl_ns = static_cast<std::uint64_t>(ttl_s * 1e9);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n(e->d_name);
    if (n.size() < 10 || n.substr(0, 5) != "nixl." || n.substr(n.size() - 5) != ".mmap") continue;
    const std::string path = dir + "/" + std::string(n);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat fs {};
    auto l = std::make_unique<loaded>();
    const bool ok = ::fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && fs.st_uid == ::geteuid() &&
                    fs.st_size >= static_cast<off_t>(sizeof(store)) &&
                    ::pread(fd, &l->st, sizeof(store), 0) == static_cast<ssize_t>(sizeof(store));
    const store& st = l->st;
    if (!ok || st.magic != store_magic || st.schema != store_schema || st.slot_count != slots ||
        st.bucket_count > max_bounds) {
      ::close(fd);
      continue;
    }
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {  // no writer holds it: gone
      ::flock(fd, LOCK_UN);
      if (now > st.last_update_ns && now - st.last_update_ns > ttl_ns) {
        ::unlink(path.c_str());
        ::close(fd);
        continue;
      }
    }
    ::close(fd);
    l->values = prometheus::detail::agent_values(
        std::vector<double>(st.bounds, st.bounds + st.bucket_count));
    for (std::size_t i = 0; i < slots; ++i) {
      l->values.totals[i] = st.counters[i];
      l->values.last[i] = st.gauges[i];
    }
    auto hist = [&](prometheus::detail::histogram& h, telemetry_event ev) {
      const auto i = static_cast<std::size_t>(ev);
      h.counts.assign(st.buckets[i], st.buckets[i] + st.bucket_count + 1);
      h.sum = st.sums[i];
    };
    hist(l->values.xfer, telemetry_event::xfer_time);
    hist(l->values.post, telemetry_event::xfer_post_time);
    auto field = [](const char* f, std::size_t cap) { return std::string(f, strnlen(f, cap)); };
    l->labels = prometheus::detail::base_labels(field(st.hostname, sizeof st.hostname),
                                                field(st.agent_name, sizeof st.agent_name)) +
                fmt::format(",pid=\"{}\",agent_instance=\"{}\"", st.pid, st.instance);
    const std::string rank = field(st.local_rank, sizeof st.local_rank);
    if (!rank.empty())
      l->labels += fmt::format(",local_rank=\"{}\"", prometheus::detail::label_value(rank));
    out.push_back(std::move(l));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a->st.pid, a->st.instance) < std::tie(b->st.pid, b->st.instance);
  });
  return out;
}

std::string render_dir() {
  auto& s = the_state();
  std::string dir;
  double ttl = 30;
  {
    std::lock_guard g(s.m);
    dir = s.dir;
    ttl = s.ttl_s;
  }
  const auto stores = load_stores(dir, ttl);
  std::vector<prometheus::detail::series> all;
  for (const auto& l : stores) all.push_back({l->labels, &l->values});
  return prometheus::detail::render(all);
}

/// One agent's store, written by its exporter.
class exporter final : public telemetry_exporter {
 public:
  exporter(int fd, store* st) : fd_(fd), st_(st) {
    bounds_.assign(st->bounds, st->bounds + st->bucket_count);
  }
  ~exporter() override {
    ::munmap(st_, sizeof(store));
    ::close(fd_);  // the writer is gone: the store stays until the TTL has passed
  }

  bool export_event(telemetry_event id, std::uint64_t value) noexcept override {
    const auto i = static_cast<std::size_t>(id);
    if (i >= slots) return true;
    __atomic_fetch_add(&st_->counters[i], value, __ATOMIC_RELAXED);
    __atomic_store_n(&st_->gauges[i], value, __ATOMIC_RELAXED);
    if (id == telemetry_event::xfer_time || id == telemetry_event::xfer_post_time) {
      const auto b = static_cast<std::size_t>(
          std::lower_bound(bounds_.begin(), bounds_.end(), static_cast<double>(value)) -
          bounds_.begin());
      __atomic_fetch_add(&st_->buckets[i][b], std::uint64_t{1}, __ATOMIC_RELAXED);
      __atomic_fetch_add(&st_->sums[i], value, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&st_->last_update_ns, monotonic_ns(), __ATOMIC_RELEASE);
    auto& s = the_state();
    if (s.m.try_lock()) {  // a loser tries again to become the owner
      try_elect(s);
      s.m.unlock();
    }
    return true;
  }

 private:
  int fd_;
  store* st_;
  std::vector<double> bounds_;
};

std::string multiproc_dir() {
  const char* d = std::getenv("NIXL_TELEMETRY_MULTIPROC_DIR");
  if (d == nullptr || *d == '\0')
    raise(status::invalid_param,
          "telemetry: NIXL_TELEMETRY_EXPORTER=prometheus_mp needs NIXL_TELEMETRY_MULTIPROC_DIR, "
          "a directory for the stores of the processes");
  std::string dir(d);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    raise(status::invalid_param, "telemetry: cannot create NIXL_TELEMETRY_MULTIPROC_DIR '{}': {}",
          dir, std::strerror(errno));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    raise(status::invalid_param, "telemetry: NIXL_TELEMETRY_MULTIPROC_DIR '{}' is not a directory",
          dir);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    raise(status::invalid_param, "telemetry: NIXL_TELEMETRY_MULTIPROC_DIR '{}' is not writable: {}",
          dir, std::strerror(errno));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    log::warn(
        "telemetry: NIXL_TELEMETRY_MULTIPROC_DIR '{}' is writable by group or others (mode "
        "{:o}); other users could publish series there",
        dir, st.st_mode & 07777);
  return dir;
}

double stale_ttl() {
  const char* t = std::getenv("NIXL_TELEMETRY_MP_STALE_TTL");
  if (t == nullptr || *t == '\0') return 30;
  char* end = nullptr;
  const double v = std::strtod(t, &end);
  if (end == t || *end != '\0' || !std::isfinite(v) || v < 0)
    raise(status::invalid_param, "NIXL_TELEMETRY_MP_STALE_TTL={} is not a number of seconds >= 0",
          t);
  return v;
}

}  // namespace

std::unique_ptr<telemetry_exporter> factory(std::string_view agent) {
  const std::string dir = multiproc_dir();
  std::vector<double> bounds;
  try {
    bounds = prometheus::detail::bucket_bounds(max_bounds);
  } catch (const std::invalid_argument& e) {
    raise(status::invalid_param, "telemetry: {}", e.what());
  }
  const double ttl = stale_ttl();
  const int port = prometheus::detail::configured_port();
  const std::string host = prometheus::detail::configured_host();
  const char* rank_env = std::getenv("NIXL_TELEMETRY_RANK_ENV");
  const char* rank =
      std::getenv(rank_env != nullptr && *rank_env != '\0' ? rank_env : "LOCAL_RANK");

  auto& s = the_state();
  std::lock_guard g(s.m);
  if (s.run_marker.empty()) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    s.run_marker = fmt::format("{:x}{:08x}", ts.tv_sec, ts.tv_nsec);
  }
  const std::uint32_t instance = s.next_instance++;
  const std::string path =
      fmt::format("{}/nixl.{}.{}.{}.mmap", dir, ::getpid(), s.run_marker, instance);
  const std::string staging = path + ".staging";
  const int fd = ::open(staging.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    raise(status::backend, "telemetry: cannot create the store '{}': {}", staging,
          std::strerror(errno));
  void* p = MAP_FAILED;
  if (::ftruncate(fd, sizeof(store)) == 0)
    p = ::mmap(nullptr, sizeof(store), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (p != MAP_FAILED) ::munmap(p, sizeof(store));
    ::close(fd);
    ::unlink(staging.c_str());
    raise(status::backend, "telemetry: cannot map and lock the store '{}': {}", staging,
          std::strerror(err));
  }
  auto* st = static_cast<store*>(p);  // zero-filled by ftruncate
  st->schema = store_schema;
  st->slot_count = slots;
  st->pid = ::getpid();
  st->instance = instance;
  st->bucket_count = static_cast<std::uint32_t>(bounds.size());
  copy_field(st->agent_name, sizeof st->agent_name, agent);
  copy_field(st->hostname, sizeof st->hostname, prometheus::detail::hostname());
  copy_field(st->local_rank, sizeof st->local_rank, rank == nullptr ? "" : rank);
  std::copy(bounds.begin(), bounds.end(), st->bounds);
  st->last_update_ns = monotonic_ns();
  __atomic_store_n(&st->magic, store_magic, __ATOMIC_RELEASE);
  if (::rename(staging.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::munmap(p, sizeof(store));
    ::close(fd);
    ::unlink(staging.c_str());
    raise(status::backend, "telemetry: cannot publish the store '{}': {}", path,
          std::strerror(err));
  }
  if (!s.configured) {
    s.configured = true;
    s.dir = dir;
    s.host = host;
    s.port = port;
    s.ttl_s = ttl;
    s.lock_path = fmt::format("{}/nixl-owner.{}:{}.lock", dir, host, port);
  }
  auto e = std::make_unique<exporter>(fd, st);
  try_elect(s);
  return e;
}

std::string render() {
  return render_dir();
}

int bound_port() noexcept {
  auto& s = the_state();
  std::lock_guard g(s.m);
  return s.owner ? s.bound : 0;
}

}  // namespace nixl::prometheus::mp
