// Prometheus exporter: per-agent counters, gauges and histograms updated by the agents'
// events, rendered on GET /metrics by one cpp-httplib server per process.

#include <nixl/telemetry/prometheus.hpp>

#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::prometheus {
namespace {

struct histogram {
  std::vector<std::uint64_t> counts;  // per bucket (not cumulative), + one for +Inf
  std::uint64_t sum = 0, count = 0;
};

struct agent_metrics {
  std::array<std::uint64_t, telemetry_event_count> totals{};
  std::array<std::uint64_t, telemetry_event_count> last{};
  histogram xfer, post;
};

struct state {
  std::mutex m;
  std::map<std::string, std::shared_ptr<agent_metrics>, std::less<>> agents;
  std::vector<std::uint64_t> bounds;  // µs, ascending
  std::string hostname;
  httplib::Server* server = nullptr;  // never destroyed: its thread runs until the process ends
  int port = 0;
};

state& the_state() {
  static auto* s = new state;
  return *s;
}

std::vector<std::uint64_t> bucket_bounds() {
  std::vector<std::uint64_t> b;
  if (const char* e = std::getenv("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US"); e != nullptr && *e) {
    std::string_view v(e);
    while (!v.empty()) {
      const auto c = v.find(',');
      const std::string item(v.substr(0, c));
      char* end = nullptr;
      const unsigned long long x = std::strtoull(item.c_str(), &end, 10);
      if (end != item.c_str() && *end == '\0') b.push_back(x);
      v = c == std::string_view::npos ? std::string_view{} : v.substr(c + 1);
    }
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
    if (b.empty())
      log::warn("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US={}: no bucket; using the default", e);
  }
  if (b.empty()) b = {10, 100, 1000, 10000, 100000, 1000000, 10000000};
  return b;
}

bool truthy(const char* v) {
  std::string s(v);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "y" || s == "yes" || s == "1" || s == "true" || s == "on";
}

std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Starts the endpoint (with the state's lock held). Throws nixl::error.
void start_server(state& s) {
  if (s.server != nullptr) return;
  int port = 9090;
  if (const char* p = std::getenv("NIXL_TELEMETRY_PROMETHEUS_PORT"); p != nullptr && *p) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || *end != '\0' || v < 0 || v > 65535)
      raise(status::invalid_param, "NIXL_TELEMETRY_PROMETHEUS_PORT={} is not a port number", p);
    port = static_cast<int>(v);
  }
  // Loopback unless NIXL_TELEMETRY_PROMETHEUS_LOCAL says otherwise: the series name the agents.
  const char* local = std::getenv("NIXL_TELEMETRY_PROMETHEUS_LOCAL");
  const std::string host =
      local == nullptr || *local == '\0' || truthy(local) ? "127.0.0.1" : "0.0.0.0";
  auto* srv = new httplib::Server;
  srv->new_task_queue = [] { return new httplib::ThreadPool(1); };
  srv->Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound =
      port == 0 ? srv->bind_to_any_port(host) : (srv->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    delete srv;
    raise(status::backend,
          "telemetry: the Prometheus endpoint cannot bind {}:{} (in use by another process?); set "
          "NIXL_TELEMETRY_PROMETHEUS_PORT",
          host, port);
  }
  s.server = srv;
  s.port = bound;
  std::thread([srv] { srv->listen_after_bind(); }).detach();
  log::info("telemetry: Prometheus endpoint on http://{}:{}/metrics", host, bound);
}

class exporter final : public telemetry_exporter {
 public:
  exporter(std::string name, std::shared_ptr<agent_metrics> m)
      : name_(std::move(name)), m_(std::move(m)) {}
  ~exporter() override {
    auto& s = the_state();
    std::lock_guard g(s.m);
    auto it = s.agents.find(name_);
    if (it != s.agents.end() && it->second == m_) s.agents.erase(it);
  }

  bool export_event(telemetry_event id, std::uint64_t value) noexcept override {
    const auto i = static_cast<std::size_t>(id);
    if (i >= telemetry_event_count) return true;
    auto& s = the_state();
    std::lock_guard g(s.m);
    m_->totals[i] += value;
    m_->last[i] = value;
    if (id == telemetry_event::xfer_time) add(m_->xfer, s.bounds, value);
    if (id == telemetry_event::xfer_post_time) add(m_->post, s.bounds, value);
    return true;
  }

 private:
  static void add(histogram& h, const std::vector<std::uint64_t>& bounds, std::uint64_t v) {
    const auto b = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) -
                                            bounds.begin());
    ++h.counts[b];
    h.sum += v;
    ++h.count;
  }

  std::string name_;
  std::shared_ptr<agent_metrics> m_;
};

std::unique_ptr<telemetry_exporter> factory(std::string_view agent) {
  return make_exporter(agent);
}

}  // namespace

std::unique_ptr<telemetry_exporter> make_exporter(std::string_view agent) {
  auto& s = the_state();
  std::lock_guard g(s.m);
  if (s.hostname.empty()) {
    char h[256] = {};
    s.hostname = ::gethostname(h, sizeof h - 1) == 0 ? std::string(h) : std::string("localhost");
    s.bounds = bucket_bounds();
  }
  start_server(s);
  auto m = std::make_shared<agent_metrics>();
  m->xfer.counts.assign(s.bounds.size() + 1, 0);
  m->post.counts.assign(s.bounds.size() + 1, 0);
  s.agents[std::string(agent)] = m;
  return std::make_unique<exporter>(std::string(agent), m);
}

std::string render() {
  auto& s = the_state();
  std::lock_guard g(s.m);
  std::string out;
  const std::string host = label_value(s.hostname);
  auto labels = [&](const std::string& agent) {
    return fmt::format("hostname=\"{}\",agent_name=\"{}\"", host, label_value(agent));
  };
  auto idx = [](telemetry_event e) { return static_cast<std::size_t>(e); };
  /// One metric family per row: its TYPE line, then one sample per agent, value(metrics, event).
  auto family = [&](const auto& rows, const char* type, const auto& value) {
    for (const auto& [name, ev] : rows) {
      out += fmt::format("# TYPE {} {}\n", name, type);
      for (const auto& [a, m] : s.agents)
        out += fmt::format("{}{{{}}} {}\n", name, labels(a), value(m, ev));
    }
  };
  const std::pair<const char*, telemetry_event> counters[] = {
      {"agent_memory_registered_total", telemetry_event::memory_registered},
      {"agent_memory_deregistered_total", telemetry_event::memory_deregistered},
      {"agent_tx_bytes_total", telemetry_event::tx_bytes},
      {"agent_rx_bytes_total", telemetry_event::rx_bytes},
      {"agent_tx_requests_num_total", telemetry_event::tx_requests_num},
      {"agent_rx_requests_num_total", telemetry_event::rx_requests_num},
      {"agent_xfer_time_total", telemetry_event::xfer_time},
      {"agent_xfer_post_time_total", telemetry_event::xfer_post_time},
      {"agent_telemetry_events_dropped_total", telemetry_event::events_dropped},
  };
  family(counters, "counter",
         [&](const auto& m, telemetry_event ev) { return m->totals[idx(ev)]; });
  out += "# TYPE agent_errors_total counter\n";
  for (const auto& [a, m] : s.agents)
    for (int v = 1; v <= 12; ++v) {
      const auto st = static_cast<status>(-v);
      out += fmt::format("agent_errors_total{{{},status=\"{}\"}} {}\n", labels(a), to_string(st),
                         m->totals[idx(error_event(st))]);
    }
  const std::pair<const char*, telemetry_event> gauges[] = {
      {"agent_tx_last_bytes", telemetry_event::tx_bytes},
      {"agent_rx_last_bytes", telemetry_event::rx_bytes},
      {"agent_memory_registered_last_bytes", telemetry_event::memory_registered},
      {"agent_memory_deregistered_last_bytes", telemetry_event::memory_deregistered},
      {"agent_xfer_time", telemetry_event::xfer_time},
      {"agent_xfer_post_time", telemetry_event::xfer_post_time},
  };
  family(gauges, "gauge", [&](const auto& m, telemetry_event ev) { return m->last[idx(ev)]; });
  for (const auto& [name, which] :
       {std::pair{"agent_xfer_time_us", 0}, {"agent_xfer_post_time_us", 1}}) {
    out += fmt::format("# TYPE {} histogram\n", name);
    for (const auto& [a, m] : s.agents) {
      const histogram& h = which == 0 ? m->xfer : m->post;
      std::uint64_t cum = 0;
      for (std::size_t b = 0; b < s.bounds.size(); ++b) {
        cum += h.counts[b];
        out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels(a), s.bounds[b], cum);
      }
      out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels(a), h.count);
      out += fmt::format("{}_sum{{{}}} {}\n", name, labels(a), h.sum);
      out += fmt::format("{}_count{{{}}} {}\n", name, labels(a), h.count);
    }
  }
  return out;
}

int bound_port() noexcept {
  auto& s = the_state();
  std::lock_guard g(s.m);
  return s.port;
}

bool register_exporter() {
  static const bool once = register_telemetry_exporter("prometheus", &factory);
  return once;
}

}  // namespace nixl::prometheus
