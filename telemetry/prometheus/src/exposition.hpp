#pragma once
// What both Prometheus exporters share (`prometheus` and `prometheus_mp`): the bucket list, the
// series values of one agent, their text rendering (exposition format 0.0.4, NIXL's names) and
// the HTTP endpoint that serves it.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/telemetry_export.hpp>

namespace nixl::prometheus::detail {

/// NIXL's default histogram upper bounds, in µs (18; no 2500000).
inline constexpr std::array<double, 18> default_bounds{
    10,    25,    50,    100,    250,    500,    1000,    2500,    5000,
    10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000, 10000000};

/// `NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US`: comma-separated real numbers (whitespace around them
/// allowed), each finite, > 0 and strictly increasing; unset or empty gives the defaults.
/// Throws std::invalid_argument for anything else, or for more than `max_bounds` of them.
std::vector<double> bucket_bounds(std::size_t max_bounds = SIZE_MAX);

/// A histogram: counts per bucket (not cumulative; the last one is +Inf) and the sum.
struct histogram {
  std::vector<std::uint64_t> counts;
  std::uint64_t sum = 0;
  void add(const std::vector<double>& bounds, std::uint64_t v);
};

/// One agent's values: running sums and last values per event, the two histograms.
struct agent_values {
  std::array<std::uint64_t, telemetry_event_count> totals{};
  std::array<std::uint64_t, telemetry_event_count> last{};
  std::vector<double> bounds;
  histogram xfer, post;
  explicit agent_values(std::vector<double> b = {});
  /// Adds one event (counter, gauge and, for the two durations, histogram).
  void add(telemetry_event id, std::uint64_t value);
};

/// One agent's series: its labels (`name="value"` pairs, comma-separated) and values.
struct series {
  std::string labels;
  const agent_values* values;
};

/// The text of `/metrics` for these agents: every family, one sample per agent (never summed).
std::string render(const std::vector<series>& agents);

/// A label value escaped as the exposition format wants (\\, \" and \n).
std::string label_value(std::string_view v);
/// `hostname="...",agent_name="..."`.
std::string base_labels(std::string_view host, std::string_view agent);
/// This machine's name (gethostname), "localhost" when it has none.
std::string hostname();

/// y, yes, on, true, 1 (any case).
bool truthy(const char* v);

/// `NIXL_TELEMETRY_PROMETHEUS_PORT` (default 9090); throws nixl::error when malformed.
int configured_port();
/// The address to bind: 127.0.0.1 unless `NIXL_TELEMETRY_PROMETHEUS_LOCAL` is false.
std::string configured_host();

/// Binds `host:port` (0: any free port) and serves GET /metrics with `body()` from a thread of
/// its own for the rest of the process. Returns the bound port, or -1 when it cannot bind.
int serve(const std::string& host, int port, std::function<std::string()> body);

}  // namespace nixl::prometheus::detail
