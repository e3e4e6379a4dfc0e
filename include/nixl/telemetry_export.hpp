#pragma once
/// Agent telemetry events (NIXL's ids and names, version 4) and where they go: NIXL's
/// shared-memory ring (`$NIXL_TELEMETRY_DIR/<agent name>`, the layout NIXL's readers read) or an
/// exporter registered by name (`NIXL_TELEMETRY_EXPORTER`, e.g. "prometheus").
///
/// The ring file: a 40-byte header `{size_t write_pos; size_t read_pos; int version (4);
/// int expected_version (4); size_t capacity; size_t mask}` and `capacity` (a power of two)
/// events of 16 bytes `{uint32 id; uint32 padding; uint64 value}`. Positions are slot indices
/// (`(pos + 1) & mask` moves on); the writer stores an event, then `write_pos`; the reader
/// consumes `[read_pos, write_pos)`, then stores `read_pos`. A full ring (one slot kept empty)
/// loses the event; lost events are reported later as `agent_telemetry_events_dropped`.

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl {

/// NIXL's telemetry event ids (`telemetry_event.h`, version 4).
enum class telemetry_event : std::uint32_t {
  tx_bytes = 0,
  rx_bytes = 1,
  tx_requests_num = 2,
  rx_requests_num = 3,
  memory_registered = 4,
  memory_deregistered = 5,
  xfer_time = 6,
  xfer_post_time = 7,
  err_not_posted = 8,  // ... err_no_telemetry = 19, in nixl_status_t order
  events_dropped = 20,
  err_xfer_stalled = 21,  // NIXL's stall-timeout event, after the dropped count
};
inline constexpr std::uint32_t telemetry_event_count = 22;
inline constexpr int telemetry_version = 4;

/// Event names, by id.
inline constexpr std::array<std::string_view, telemetry_event_count> telemetry_event_names{
    "agent_tx_bytes",          "agent_rx_bytes",          "agent_tx_requests_num",
    "agent_rx_requests_num",   "agent_memory_registered", "agent_memory_deregistered",
    "agent_xfer_time",         "agent_xfer_post_time",    "agent_err_not_posted",
    "agent_err_invalid_param", "agent_err_backend",       "agent_err_not_found",
    "agent_err_mismatch",      "agent_err_not_allowed",   "agent_err_repost_active",
    "agent_err_unknown",       "agent_err_not_supported", "agent_err_remote_disconnect",
    "agent_err_canceled",      "agent_err_no_telemetry",  "agent_telemetry_events_dropped",
    "agent_err_xfer_stalled",
};

/// The `agent_err_*` event of an error status (`not_posted` -1 ... `no_telemetry` -12 in
/// order, then `xfer_stalled` -13 after `events_dropped`).
inline constexpr telemetry_event error_event(status s) noexcept {
  if (s == status::xfer_stalled) return telemetry_event::err_xfer_stalled;
  const int v = -static_cast<int>(s);
  return static_cast<telemetry_event>(v >= 1 && v <= 12 ? 7 + v : 15);  // else err_unknown
}

/// Where an agent's events go. Called with the agent's telemetry lock held: one call at a time.
class telemetry_exporter {
 public:
  virtual ~telemetry_exporter() = default;
  /// One event; false when it could not be kept (counted as dropped).
  virtual bool export_event(telemetry_event id, std::uint64_t value) noexcept = 0;
};

/// Makes the exporter of an agent, or throws nixl::error.
using telemetry_exporter_factory = std::unique_ptr<telemetry_exporter> (*)(std::string_view agent);

namespace detail {
struct exporter_entry {
  telemetry_exporter_factory make = nullptr;
  bool required = false;  ///< its failure fails the agent's constructor
};
inline std::map<std::string, exporter_entry, std::less<>>& exporter_registry() {
  static std::map<std::string, exporter_entry, std::less<>> r;
  return r;
}
inline std::mutex& exporter_registry_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace detail

/// Makes `name` (the value of `NIXL_TELEMETRY_EXPORTER`) available. With `required`, an error of
/// the factory leaves the agent's constructor (as NIXL's prometheus_mp); else the agent runs
/// without export, with a warning. Returns true.
inline bool register_telemetry_exporter(std::string name, telemetry_exporter_factory f,
                                        bool required = false) {
  std::lock_guard g(detail::exporter_registry_mutex());
  detail::exporter_registry()[std::move(name)] = {f, required};
  return true;
}

/// NIXL's ring (`BUFFER`), written by one agent.
class telemetry_ring final : public telemetry_exporter {
 public:
  struct header {
    std::atomic<std::size_t> write_pos;
    std::atomic<std::size_t> read_pos;
    std::atomic<int> version;
    int expected_version;
    std::size_t capacity;
    std::size_t mask;
  };
  struct event {
    std::uint32_t id;
    std::uint32_t padding;
    std::uint64_t value;
  };
  static_assert(sizeof(event) == 16);
  static_assert(sizeof(std::atomic<std::size_t>) == sizeof(std::size_t));

  /// Creates (or truncates) `path` with room for `capacity` events; throws nixl::error.
  telemetry_ring(const std::string& path, std::size_t capacity) : path_(path) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
      raise(status::invalid_param, "telemetry: ring capacity {} is not a power of two (>= 2)",
            capacity);
    size_ = sizeof(header) + capacity * sizeof(event);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      raise(status::backend, "telemetry: cannot create '{}': {}", path, std::strerror(errno));
    void* p = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(size_)) == 0)
      p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED)
      raise(status::backend, "telemetry: cannot map '{}' ({} bytes): {}", path, size_,
            std::strerror(err));
    base_ = p;
    auto* h = new (base_) header{};
    h->write_pos.store(0, std::memory_order_relaxed);
    h->read_pos.store(0, std::memory_order_relaxed);
    h->expected_version = telemetry_version;
    h->capacity = capacity;
    h->mask = capacity - 1;
    h->version.store(telemetry_version, std::memory_order_release);
  }
  telemetry_ring(const telemetry_ring&) = delete;
  telemetry_ring& operator=(const telemetry_ring&) = delete;
  ~telemetry_ring() override { ::munmap(base_, size_); }

  bool export_event(telemetry_event id, std::uint64_t value) noexcept override {
    auto* h = static_cast<header*>(base_);
    const std::size_t w = h->write_pos.load(std::memory_order_relaxed);
    const std::size_t next = (w + 1) & h->mask;
    if (next == h->read_pos.load(std::memory_order_acquire)) return false;  // full
    auto* ev = reinterpret_cast<event*>(static_cast<char*>(base_) + sizeof(header)) + w;
    ev->id = static_cast<std::uint32_t>(id);
    ev->padding = 0;
    ev->value = value;
    h->write_pos.store(next, std::memory_order_release);
    return true;
  }

  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

namespace detail {

/// An agent's telemetry: the exporter, the `NIXL_TELEMETRY_ENABLED_METRICS` filter and the
/// count of events lost since the last one kept.
class telemetry_sink {
 public:
  explicit telemetry_sink(std::unique_ptr<telemetry_exporter> e) : exporter_(std::move(e)) {
    const char* m = std::getenv("NIXL_TELEMETRY_ENABLED_METRICS");
    std::vector<std::string> pats;
    if (m != nullptr) {
      std::string_view v(m);
      while (!v.empty()) {
        const auto c = v.find(',');
        std::string p(v.substr(0, c));
        auto space = [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; };
        while (!p.empty() && space(p.front())) p.erase(0, 1);
        while (!p.empty() && space(p.back())) p.pop_back();
        if (!p.empty()) pats.push_back(std::move(p));
        v = c == std::string_view::npos ? std::string_view{} : v.substr(c + 1);
      }
    }
    for (std::uint32_t i = 0; i < telemetry_event_count; ++i) {
      bool on = pats.empty();
      const std::string n(telemetry_event_names[i]);
      for (const auto& p : pats) on = on || ::fnmatch(p.c_str(), n.c_str(), 0) == 0;
      wanted_[i] = on;
    }
    for (const auto& p : pats) {
      bool any = false;
      for (const auto n : telemetry_event_names)
        any = any || ::fnmatch(p.c_str(), std::string(n).c_str(), 0) == 0;
      if (!any)
        log::warn("Ignoring NIXL_TELEMETRY_ENABLED_METRICS entry '{}': no telemetry metric matches",
                  p);
    }
  }

  telemetry_exporter& exporter() noexcept { return *exporter_; }

  void event(telemetry_event id, std::uint64_t value) noexcept {
    const auto i = static_cast<std::uint32_t>(id);
    if (i >= telemetry_event_count || !wanted_[i]) return;
    std::lock_guard g(m_);
    put(id, value);
  }
  /// A request completed: bytes, request count, durations (tx for WRITE, rx for READ).
  void completion(bool write, std::uint64_t bytes, std::uint64_t xfer_us,
                  std::uint64_t post_us) noexcept {
    std::lock_guard g(m_);
    put(write ? telemetry_event::tx_bytes : telemetry_event::rx_bytes, bytes);
    put(write ? telemetry_event::tx_requests_num : telemetry_event::rx_requests_num, 1);
    put(telemetry_event::xfer_time, xfer_us);
    put(telemetry_event::xfer_post_time, post_us);
  }
  void error(status s) noexcept { event(error_event(s), 1); }

 private:
  void put(telemetry_event id, std::uint64_t v) noexcept {
    if (!wanted_[static_cast<std::uint32_t>(id)]) return;
    if (dropped_ > 0 && wanted_[static_cast<std::uint32_t>(telemetry_event::events_dropped)]) {
      if (!exporter_->export_event(telemetry_event::events_dropped, dropped_)) {
        ++dropped_;
        return;
      }
      dropped_ = 0;
    }
    if (!exporter_->export_event(id, v)) ++dropped_;
  }

  std::unique_ptr<telemetry_exporter> exporter_;
  std::array<bool, telemetry_event_count> wanted_{};
  std::mutex m_;
  std::uint64_t dropped_ = 0;
};

/// NIXL's rules, for an agent with telemetry on: `NIXL_TELEMETRY_EXPORTER` names a registered
/// exporter; else `NIXL_TELEMETRY_DIR` gives the ring `<dir>/<agent name>` of
/// `NIXL_TELEMETRY_BUFFER_SIZE` events (default 4096); else none (per-request telemetry only).
/// A failing exporter is logged and the agent runs without one, unless it was registered as
/// required (then the error is thrown).
inline std::shared_ptr<telemetry_sink> make_telemetry_sink(std::string_view agent) {
  const char* name = std::getenv("NIXL_TELEMETRY_EXPORTER");
  exporter_entry f;
  if (name != nullptr && *name != '\0') {
    {
      std::lock_guard g(exporter_registry_mutex());
      auto it = exporter_registry().find(std::string_view(name));
      if (it != exporter_registry().end()) f = it->second;
    }
    if (f.make == nullptr) {
      log::warn("agent '{}': telemetry exporter '{}' is not built in; running without one", agent,
                name);
      return nullptr;
    }
    if (f.required) return std::make_shared<telemetry_sink>(f.make(agent));
  }
  try {
    if (f.make != nullptr) return std::make_shared<telemetry_sink>(f.make(agent));
    const char* dir = std::getenv("NIXL_TELEMETRY_DIR");
    if (dir == nullptr || *dir == '\0') return nullptr;
    std::size_t cap = 4096;
    if (const char* s = std::getenv("NIXL_TELEMETRY_BUFFER_SIZE"); s != nullptr && *s != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(s, &end, 0);
      if (end == s || *end != '\0' || v < 2 || (v & (v - 1)) != 0) {
        log::warn("NIXL_TELEMETRY_BUFFER_SIZE={} is not a power of two; using 4096", s);
      } else {
        cap = static_cast<std::size_t>(v);
      }
    }
    ::mkdir(dir, 0755);
    std::string file(agent);
    for (auto& c : file)
      if (c == '/' || c == '\0') c = '_';
    return std::make_shared<telemetry_sink>(
        std::make_unique<telemetry_ring>(std::string(dir) + "/" + file, cap));
  } catch (const std::exception& e) {
    log::warn("agent '{}': telemetry export is off: {}", agent, e.what());
    return nullptr;
  }
}

}  // namespace detail
}  // namespace nixl
