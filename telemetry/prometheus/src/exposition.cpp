// The rendering and the HTTP endpoint both Prometheus exporters use (exposition.hpp).

#include "exposition.hpp"

#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::prometheus::detail {

std::vector<double> bucket_bounds(std::size_t max_bounds) {
  const char* e = std::getenv("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US");
  std::string_view v = e == nullptr ? std::string_view{} : std::string_view(e);
  auto blank = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  };
  if (blank(v)) return {default_bounds.begin(), default_bounds.end()};
  std::vector<double> b;
  for (;;) {
    const auto c = v.find(',');
    const std::string item(v.substr(0, c));
    const char* p = item.c_str();
    char* end = nullptr;
    const double x = std::strtod(p, &end);
    while (end != nullptr && std::isspace(static_cast<unsigned char>(*end))) ++end;
    if (end == p || blank(item) || *end != '\0' || !std::isfinite(x) || x <= 0 ||
        (!b.empty() && x <= b.back()))
      throw std::invalid_argument(fmt::format(
          "NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US='{}': '{}' is not a finite number > 0 above the "
          "one before it",
          e, item));
    b.push_back(x);
    if (c == std::string_view::npos) break;
    v = v.substr(c + 1);
  }
  if (b.size() > max_bounds)
    throw std::invalid_argument(
        fmt::format("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US='{}': {} buckets, at most {} here", e,
                    b.size(), max_bounds));
  return b;
}

void histogram::add(const std::vector<double>& bounds, std::uint64_t v) {
  const auto i = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(v)) - bounds.begin());
  ++counts[i];
  sum += v;
}

agent_values::agent_values(std::vector<double> b) : bounds(std::move(b)) {
  xfer.counts.assign(bounds.size() + 1, 0);
  post.counts.assign(bounds.size() + 1, 0);
}

void agent_values::add(telemetry_event id, std::uint64_t value) {
  const auto i = static_cast<std::size_t>(id);
  if (i >= telemetry_event_count) return;
  totals[i] += value;
  last[i] = value;
  if (id == telemetry_event::xfer_time) xfer.add(bounds, value);
  if (id == telemetry_event::xfer_post_time) post.add(bounds, value);
}

std::string render(const std::vector<series>& agents) {
  std::string out;
  auto idx = [](telemetry_event e) { return static_cast<std::size_t>(e); };
  /// One metric family per row: its TYPE line, then one sample per agent, value(values, event).
  auto family = [&](const auto& rows, const char* type, const auto& value) {
    for (const auto& [name, ev] : rows) {
      out += fmt::format("# TYPE {} {}\n", name, type);
      for (const auto& a : agents)
        out += fmt::format("{}{{{}}} {}\n", name, a.labels, value(*a.values, ev));
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
         [&](const agent_values& m, telemetry_event ev) { return m.totals[idx(ev)]; });
  out += "# TYPE agent_errors_total counter\n";
  for (const auto& a : agents)
    for (int v = 1; v <= -static_cast<int>(last_error); ++v) {
      const auto st = static_cast<status>(-v);
      out += fmt::format("agent_errors_total{{{},status=\"{}\"}} {}\n", a.labels, to_string(st),
                         a.values->totals[idx(error_event(st))]);
    }
  const std::pair<const char*, telemetry_event> gauges[] = {
      {"agent_tx_last_bytes", telemetry_event::tx_bytes},
      {"agent_rx_last_bytes", telemetry_event::rx_bytes},
      {"agent_memory_registered_last_bytes", telemetry_event::memory_registered},
      {"agent_memory_deregistered_last_bytes", telemetry_event::memory_deregistered},
      {"agent_xfer_time", telemetry_event::xfer_time},
      {"agent_xfer_post_time", telemetry_event::xfer_post_time},
  };
  family(gauges, "gauge",
         [&](const agent_values& m, telemetry_event ev) { return m.last[idx(ev)]; });
  for (const auto& [name, which] :
       {std::pair{"agent_xfer_time_us", 0}, {"agent_xfer_post_time_us", 1}}) {
    out += fmt::format("# TYPE {} histogram\n", name);
    for (const auto& a : agents) {
      const agent_values& m = *a.values;
      const histogram& h = which == 0 ? m.xfer : m.post;
      std::uint64_t cum = 0;
      for (std::size_t b = 0; b < m.bounds.size(); ++b) {
        cum += h.counts[b];
        out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, a.labels, m.bounds[b], cum);
      }
      cum += h.counts[m.bounds.size()];
      out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, a.labels, cum);
      out += fmt::format("{}_sum{{{}}} {}\n", name, a.labels, h.sum);
      out += fmt::format("{}_count{{{}}} {}\n", name, a.labels, cum);
    }
  }
  return out;
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

std::string base_labels(std::string_view host, std::string_view agent) {
  return fmt::format("hostname=\"{}\",agent_name=\"{}\"", label_value(host), label_value(agent));
}

std::string hostname() {
  char h[256] = {};
  return ::gethostname(h, sizeof h - 1) == 0 && h[0] != '\0' ? std::string(h)
                                                             : std::string("localhost");
}

bool truthy(const char* v) {
  std::string s(v);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "y" || s == "yes" || s == "1" || s == "true" || s == "on";
}

int configured_port() {
  const char* p = std::getenv("NIXL_TELEMETRY_PROMETHEUS_PORT");
  if (p == nullptr || *p == '\0') return 9090;
  char* end = nullptr;
  const long v = std::strtol(p, &end, 10);
  if (end == p || *end != '\0' || v < 0 || v > 65535)
    raise(status::invalid_param, "NIXL_TELEMETRY_PROMETHEUS_PORT={} is not a port number", p);
  return static_cast<int>(v);
}

std::string configured_host() {
  // Loopback unless NIXL_TELEMETRY_PROMETHEUS_LOCAL says otherwise: the series name the agents.
  const char* local = std::getenv("NIXL_TELEMETRY_PROMETHEUS_LOCAL");
  return local == nullptr || *local == '\0' || truthy(local) ? "127.0.0.1" : "0.0.0.0";
}

int serve(const std::string& host, int port, std::function<std::string()> body) {
  auto* srv = new httplib::Server;  // never destroyed: its thread runs until the process ends
  srv->new_task_queue = [] { return new httplib::ThreadPool(1); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second process of the
  // same user could bind the port too.
  srv->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  srv->Get("/metrics", [body = std::move(body)](const httplib::Request&, httplib::Response& res) {
    res.set_content(body(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound =
      port == 0 ? srv->bind_to_any_port(host) : (srv->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    delete srv;
    return -1;
  }
  std::thread([srv] { srv->listen_after_bind(); }).detach();
  log::info("telemetry: Prometheus endpoint on http://{}:{}/metrics", host, bound);
  return bound;
}

}  // namespace nixl::prometheus::detail
