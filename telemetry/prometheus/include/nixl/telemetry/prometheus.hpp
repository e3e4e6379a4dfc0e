#pragma once
/// The Prometheus exporters of agent telemetry: with `NIXL_TELEMETRY_EXPORTER=prometheus` (and
/// telemetry on), every agent of the process adds its series to one `/metrics` endpoint on
/// `NIXL_TELEMETRY_PROMETHEUS_PORT` (default 9090); with `prometheus_mp`, the agents of every
/// process sharing `NIXL_TELEMETRY_MULTIPROC_DIR` are served by one of them on that port.
/// docs/telemetry.md lists the series and the settings.
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

namespace mp {
/// The `prometheus_mp` exporter of agent `agent`: its store in `NIXL_TELEMETRY_MULTIPROC_DIR`,
/// and this process's bid to serve the port. Throws nixl::error when the directory is missing
/// or cannot be created, or a setting is malformed (more than 32 buckets, for one).
std::unique_ptr<telemetry_exporter> factory(std::string_view agent);
/// The text this process serves when it is the owner: every store of the directory.
std::string render();
/// The port this process serves, 0 while another process is the owner.
int bound_port() noexcept;
}  // namespace mp

/// Registers the exporters under the names "prometheus" and "prometheus_mp" (idempotent).
bool register_exporter();

namespace detail {
inline const bool registered = register_exporter();
}

}  // namespace nixl::prometheus
