#pragma once
/// The Prometheus exporter of agent telemetry: with `NIXL_TELEMETRY_EXPORTER=prometheus` (and
/// telemetry on), every agent of the process adds its series to one `/metrics` endpoint on
/// `NIXL_TELEMETRY_PROMETHEUS_PORT` (default 9090). docs/python.md ("Telemetry events") lists
/// the series.
/// Including this header (nixl/nixl.hpp does when nixl::prometheus is linked) registers it.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nixl/telemetry_export.hpp>

namespace nixl::prometheus {

/// The exporter of agent `agent`; starts the process's HTTP endpoint on first use. Throws
/// nixl::error when the port cannot be bound.
std::unique_ptr<telemetry_exporter> make_exporter(std::string_view agent);

/// The text `/metrics` answers (Prometheus exposition format 0.0.4).
std::string render();

/// The port the endpoint listens on, 0 before it started.
int bound_port() noexcept;

/// Registers the exporter under the name "prometheus" (idempotent).
bool register_exporter();

namespace detail {
inline const bool registered = register_exporter();
}

}  // namespace nixl::prometheus
