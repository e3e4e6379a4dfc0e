// Prometheus exporter: per-agent counters, gauges and histograms updated by the agents'
// events, rendered on GET /metrics by one endpoint per process (exposition.hpp).

#include <nixl/telemetry/prometheus.hpp>

#include <map>
#include <mutex>

#include <nixl/log.hpp>
#include <nixl/status.hpp>

#include "exposition.hpp"

namespace nixl::prometheus {
namespace {

using detail::agent_values;

struct state {
  std::mutex m;
  std::map<std::string, std::shared_ptr<agent_values>, std::less<>> agents;
  std::vector<double> bounds;  // µs, ascending
  std::string hostname;
  int port = 0;  // 0 until the endpoint is up
};

state& the_state() {
  static auto* s = new state;
  return *s;
}

class exporter final : public telemetry_exporter {
 public:
  exporter(std::string name, std::shared_ptr<agent_values> m)
      : name_(std::move(name)), m_(std::move(m)) {}
  ~exporter() override {
    auto& s = the_state();
    std::lock_guard g(s.m);
    auto it = s.agents.find(name_);
    if (it != s.agents.end() && it->second == m_) s.agents.erase(it);
  }

  bool export_event(telemetry_event id, std::uint64_t value) noexcept override {
    auto& s = the_state();
    std::lock_guard g(s.m);
    m_->add(id, value);
    return true;
  }

 private:
  std::string name_;
  std::shared_ptr<agent_values> m_;
};

std::unique_ptr<telemetry_exporter> factory(std::string_view agent) {
  return make_exporter(agent);
}

}  // namespace

std::unique_ptr<telemetry_exporter> make_exporter(std::string_view agent) {
  auto& s = the_state();
  std::lock_guard g(s.m);
  if (s.hostname.empty()) {
    s.bounds = detail::bucket_bounds();
    s.hostname = detail::hostname();
  }
  if (s.port == 0) {
    const int port = detail::configured_port();
    const std::string host = detail::configured_host();
    s.port = detail::serve(host, port, [] { return render(); });
    if (s.port < 0) {
      s.port = 0;
      raise(status::backend,
            "telemetry: the Prometheus endpoint cannot bind {}:{} (in use by another process?); "
            "set NIXL_TELEMETRY_PROMETHEUS_PORT",
            host, port);
    }
  }
  auto m = std::make_shared<agent_values>(s.bounds);
  s.agents[std::string(agent)] = m;
  return std::make_unique<exporter>(std::string(agent), m);
}

std::string render() {
  auto& s = the_state();
  std::lock_guard g(s.m);
  std::vector<detail::series> all;
  for (const auto& [a, m] : s.agents) all.push_back({detail::base_labels(s.hostname, a), m.get()});
  return detail::render(all);
}

int bound_port() noexcept {
  auto& s = the_state();
  std::lock_guard g(s.m);
  return s.port;
}

bool register_exporter() {
  static const bool once = register_telemetry_exporter("prometheus", &factory) &&
                           register_telemetry_exporter("prometheus_mp", &mp::factory, true);
  return once;
}

}  // namespace nixl::prometheus
