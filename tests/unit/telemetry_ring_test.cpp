// Agent telemetry events from the core: NIXL's ring layout under NIXL_TELEMETRY_DIR, written by
// C++ agents, and exporters chosen by NIXL_TELEMETRY_EXPORTER.
#include <nixl/agent.hpp>
#include <nixl/telemetry_export.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "nixl_test/catch.hpp"
#include "nixl_test/env.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::telemetry_event;
using nixl::xfer_op;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/nixl-tel-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  REQUIRE(d != nullptr);
  return d;
}

struct ring_view {
  std::uint64_t write = 0, read = 0, capacity = 0, mask = 0;
  std::int32_t version = 0, expected = 0;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> events;  // [read, write)
};

ring_view parse(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ring_view v;
  REQUIRE(data.size() >= 40);
  std::memcpy(&v.write, data.data() + 0, 8);
  std::memcpy(&v.read, data.data() + 8, 8);
  std::memcpy(&v.version, data.data() + 16, 4);
  std::memcpy(&v.expected, data.data() + 20, 4);
  std::memcpy(&v.capacity, data.data() + 24, 8);
  std::memcpy(&v.mask, data.data() + 32, 8);
  REQUIRE(data.size() == 40 + 16 * v.capacity);
  for (auto i = v.read; i != v.write; i = (i + 1) & v.mask) {
    std::uint32_t id = 0;
    std::uint64_t value = 0;
    std::memcpy(&id, data.data() + 40 + 16 * i, 4);
    std::memcpy(&value, data.data() + 40 + 16 * i + 8, 8);
    v.events.emplace_back(id, value);
  }
  return v;
}

constexpr std::uint32_t id(telemetry_event e) {
  return static_cast<std::uint32_t>(e);
}

std::vector<std::pair<std::uint32_t, std::uint64_t>> captured;
struct capture_exporter final : nixl::telemetry_exporter {
  bool export_event(telemetry_event e, std::uint64_t v) noexcept override {
    captured.emplace_back(id(e), v);
    return true;
  }
};

/// MEMCPY backends on `a` (delay_polls `delay`) and `b`, `src` and `dst` connected; returns a's
/// WRITE of all of `src` to `dst`.
auto connected_write(test_agent& a, test_agent& b, const char* delay, buffer& src, buffer& dst) {
  a.create_backend<memcpy_backend>({{"delay_polls", delay}});
  b.create_backend<memcpy_backend>();
  connect_pair(a, b, src, dst);
  return a.create_request(xfer_op::write, src.whole(), dst.whole(), b.name());
}

/// Makes agents created under `env` export to `captured` (cleared), the metrics `filter` only.
void export_to_captured(env_guard& env, const char* exporter, const char* filter) {
  nixl::register_telemetry_exporter(exporter, [](std::string_view) {
    return std::unique_ptr<nixl::telemetry_exporter>(new capture_exporter);
  });
  env.set("NIXL_TELEMETRY_EXPORTER", exporter);
  env.set("NIXL_TELEMETRY_ENABLE", "y");
  env.set("NIXL_TELEMETRY_ENABLED_METRICS", filter);
  captured.clear();
}

}  // namespace

TEST_CASE("telemetry: a C++ agent writes NIXL's ring: registrations, completions, errors") {
  env_guard env;
  const auto dir = temp_dir();
  env.set("NIXL_TELEMETRY_DIR", dir);
  env.set("NIXL_TELEMETRY_BUFFER_SIZE", "64");
  test_agent a("ring-a", {.capture_telemetry = true}), b("ring-b");
  CHECK(a.telemetry_exporting());
  CHECK_FALSE(b.telemetry_exporting());  // telemetry off for b
  buffer src(1024), dst(1024);
  auto w = connected_write(a, b, "2", src, dst);
  CHECK(w.post() == status::in_progress);
  CHECK(wait(w) == status::success);
  CHECK(w.status() == status::success);  // polled again: no second completion
  auto r = a.create_request(xfer_op::read, src.blocks(2, 256), dst.blocks(2, 256), "ring-b");
  CHECK(r.post() == status::in_progress);
  CHECK(r.post() == status::repost_active);  // an error of the data path
  CHECK(wait(r) == status::success);
  a.deregister_memory(src.reg());
  const auto v = parse(dir + "/ring-a");
  CHECK(v.version == 4);
  CHECK(v.expected == 4);
  CHECK(v.capacity == 64);
  CHECK(v.mask == 63);
  REQUIRE(v.events.size() == 11);
  CHECK(v.events[0] == std::pair{id(telemetry_event::memory_registered), std::uint64_t{1024}});
  CHECK(v.events[1] == std::pair{id(telemetry_event::tx_bytes), std::uint64_t{1024}});
  CHECK(v.events[2] == std::pair{id(telemetry_event::tx_requests_num), std::uint64_t{1}});
  CHECK(v.events[3].first == id(telemetry_event::xfer_time));
  CHECK(v.events[4].first == id(telemetry_event::xfer_post_time));
  CHECK(v.events[3].second >= v.events[4].second);
  CHECK(v.events[5] == std::pair{id(telemetry_event::err_not_posted) + 6, std::uint64_t{1}});
  CHECK(v.events[5].first == id(nixl::error_event(status::repost_active)));
  CHECK(v.events[6] == std::pair{id(telemetry_event::rx_bytes), std::uint64_t{512}});
  CHECK(v.events[7] == std::pair{id(telemetry_event::rx_requests_num), std::uint64_t{1}});
  CHECK(v.events[10] == std::pair{id(telemetry_event::memory_deregistered), std::uint64_t{1024}});
  CHECK(::access((dir + "/ring-b").c_str(), F_OK) != 0);
}

TEST_CASE("telemetry: exporters by name; an unknown one leaves the agent without") {
  env_guard env;
  export_to_captured(env, "capture_test", "agent_memory_*");
  {
    test_agent a("cap");
    CHECK(a.telemetry_exporting());
    a.create_backend<memcpy_backend>();
    buffer x(100);
    a.register_memory(x.reg());
    a.record_telemetry(telemetry_event::tx_bytes, 5);  // filtered out
    a.deregister_memory(x.reg());
  }
  CHECK(captured == std::vector<std::pair<std::uint32_t, std::uint64_t>>{
                        {id(telemetry_event::memory_registered), 100},
                        {id(telemetry_event::memory_deregistered), 100}});
  env.set("NIXL_TELEMETRY_EXPORTER", "no_such_exporter");
  test_agent b("nocap");
  CHECK(b.telemetry_enabled());
  CHECK_FALSE(b.telemetry_exporting());
}

TEST_CASE("telemetry: a stalled request counts agent_err_xfer_stalled once") {
  env_guard env;
  export_to_captured(env, "capture_stall", "agent_err_*");
  CHECK(nixl::telemetry_event_names[id(telemetry_event::err_xfer_stalled)] ==
        "agent_err_xfer_stalled");
  CHECK(nixl::error_event(status::xfer_stalled) == telemetry_event::err_xfer_stalled);
  nixl::log::set_sink([](nixl::log::level, std::string_view) noexcept {});
  {
    nixl::agent_config cfg;
    cfg.xfer_stall_timeout = std::chrono::milliseconds(10);
    test_agent a("stall-a", cfg), b("stall-b");
    buffer src(64), dst(64);
    auto r = connected_write(a, b, "-1", src, dst);
    REQUIRE(r.post() == status::in_progress);
    CHECK(wait(r, std::chrono::seconds(10)) == status::xfer_stalled);
    CHECK(r.status() == status::xfer_stalled);
    CHECK(r.post() == status::xfer_stalled);
  }
  nixl::log::set_sink(nullptr);
  CHECK(captured == std::vector<std::pair<std::uint32_t, std::uint64_t>>{
                        {id(telemetry_event::err_xfer_stalled), 1}});
}
