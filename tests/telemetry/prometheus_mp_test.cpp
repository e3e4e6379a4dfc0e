// The multi-process Prometheus exporter (NIXL_TELEMETRY_EXPORTER=prometheus_mp): three writer
// processes, one of them serving 127.0.0.1:<port>; a scrape shows each process's series; the
// owner killed, another takes the port; a dead writer's store is removed after the TTL; bad
// settings fail the agent's constructor.

#include <nixl/agent.hpp>
#include <nixl/telemetry/prometheus.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nixl_test/catch.hpp"
#include "nixl_test/env.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/fixtures.hpp"
#include "nixl_test/peer_process.hpp"
#include "nixl_test/temp_file.hpp"
#include "nixl_test/wait.hpp"

using namespace nixl::test;
using nixl::telemetry_event;
namespace fs = std::filesystem;

namespace {

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t n = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(s);
  return ntohs(a.sin_port);
}

/// GET /metrics from 127.0.0.1:port; the body, or "" when nothing answers (5 s at most).
std::string scrape(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(s, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t r; (r = ::recv(s, buf, sizeof buf, 0)) > 0;) out.append(buf, r);
    }
  }
  ::close(s);
  const auto body = out.find("\r\n\r\n");
  return out.rfind("HTTP/1.", 0) == 0 && out.find(" 200 ") != std::string::npos &&
                 body != std::string::npos
             ? out.substr(body + 4)
             : std::string{};
}

/// The value of the sample `name{<labels of agent and pid>extra}`, or -1.
long long sample(const std::string& text, const std::string& name, const std::string& agent,
                 pid_t pid, const std::string& extra = "") {
  const std::string who =
      "agent_name=\"" + agent + "\",pid=\"" + std::to_string(pid) + "\",agent_instance=\"0\"";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{hostname=", 0) != 0) continue;
    const auto close = line.find("} ");
    if (close == std::string::npos) continue;
    const std::string labels = line.substr(name.size() + 1, close - name.size() - 1);
    if (labels.find(who) == std::string::npos) continue;
    if (extra.empty()
            ? labels.find("le=") != std::string::npos || labels.find("status=") != std::string::npos
            : !labels.ends_with(extra))
      continue;
    return std::stoll(line.substr(close + 2));
  }
  return -1;
}

std::string ev(telemetry_event e, std::uint64_t v) {
  return "EV " + std::to_string(static_cast<std::uint32_t>(e)) + " " + std::to_string(v);
}

std::size_t stores_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto f = e.path().filename().string();
    n += f.rfind("nixl.", 0) == 0 && f.size() > 5 && f.ends_with(".mmap");
  }
  return n;
}

void pause_a_little() {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

TEST_CASE("prometheus_mp: three processes, one endpoint, each process its own series") {
  env_guard env;
  const scratch tmp(fs::temp_directory_path(), "nixl-mp");
  const std::string top = tmp.dir.string();
  const std::string dir = top + "/mp";  // absent: created 0700
  const int port = free_port();
  env.set("NIXL_TELEMETRY_EXPORTER", "prometheus_mp");
  env.set("NIXL_TELEMETRY_ENABLE", "y");
  env.set("NIXL_TELEMETRY_MULTIPROC_DIR", dir);
  env.set("NIXL_TELEMETRY_PROMETHEUS_PORT", std::to_string(port));
  env.set("NIXL_TELEMETRY_PROMETHEUS_LOCAL", "y");
  env.set("NIXL_TELEMETRY_MP_STALE_TTL", "1");
  env.set("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US", "10, 100,1000.5");
  std::vector<std::unique_ptr<peer_process>> w;
  for (int i = 0; i < 3; ++i) {
    env.set("LOCAL_RANK", std::to_string(i));
    w.push_back(std::make_unique<peer_process>(
        NIXL_MP_WRITER, std::vector<std::string>{"mp-" + std::to_string(i)}));
  }
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(stores_in(dir) == 3);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(w[i]->ask(ev(telemetry_event::tx_bytes, 1000 * (i + 1))) == "OK");
    REQUIRE(w[i]->ask(ev(telemetry_event::xfer_time, 50)) == "OK");
    REQUIRE(w[i]->ask(ev(telemetry_event::xfer_time, 5000)) == "OK");
  }
  auto owners = [&] {
    std::vector<int> o;
    for (std::size_t i = 0; i < w.size(); ++i)
      if (w[i] && w[i]->ask("PORT") != "0") o.push_back(static_cast<int>(i));
    return o;
  };
  const auto first = owners();
  REQUIRE(first.size() == 1);
  const int owner = first[0];
  CHECK(w[owner]->ask("PORT") == std::to_string(port));

  std::string text;
  REQUIRE(wait_until([&] {
    text = scrape(port);
    if (text.empty()) pause_a_little();
    return !text.empty();
  }));
  for (int i = 0; i < 3; ++i) {
    const std::string a = "mp-" + std::to_string(i);
    const pid_t pid = w[i]->pid();
    CHECK(sample(text, "agent_tx_bytes_total", a, pid) == 1000 * (i + 1));
    CHECK(sample(text, "agent_tx_last_bytes", a, pid) == 1000 * (i + 1));
    CHECK(sample(text, "agent_xfer_time_us_bucket", a, pid, ",le=\"10\"") == 0);
    CHECK(sample(text, "agent_xfer_time_us_bucket", a, pid, ",le=\"100\"") == 1);
    CHECK(sample(text, "agent_xfer_time_us_bucket", a, pid, ",le=\"1000.5\"") == 1);
    CHECK(sample(text, "agent_xfer_time_us_bucket", a, pid, ",le=\"+Inf\"") == 2);
    CHECK(sample(text, "agent_xfer_time_us_sum", a, pid) == 5050);
    CHECK(sample(text, "agent_xfer_time_us_count", a, pid) == 2);
    CHECK(sample(text, "agent_errors_total", a, pid, ",status=\"NIXL_ERR_NOT_FOUND\"") == 0);
    CHECK(text.find("agent_name=\"" + a + "\",pid=\"" + std::to_string(pid) +
                    "\",agent_instance=\"0\",local_rank=\"" + std::to_string(i) + "\"") !=
          std::string::npos);
  }
  CHECK(text.find("# TYPE agent_xfer_post_time_us histogram") != std::string::npos);

  // A store of another user is neither shown nor removed.
  std::string foreign;
  if (::geteuid() == 0) {
    const std::string prefix = "nixl." + std::to_string(w[owner]->pid()) + ".";
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind(prefix, 0) == 0) {
        std::ifstream in(e.path(), std::ios::binary);
        std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        REQUIRE(data.size() == 6800);  // NIXL's layout: magic, schema 1, 21 slots
        CHECK(data.compare(0, 8, "NIXLMPS1") == 0);
        std::uint32_t schema = 0, slot_count = 0;
        std::memcpy(&schema, data.data() + 8, 4);
        std::memcpy(&slot_count, data.data() + 12, 4);
        CHECK(schema == 1);
        CHECK(slot_count == 21);
        CHECK((fs::status(e.path()).permissions() & fs::perms::all) ==
              (fs::perms::owner_read | fs::perms::owner_write));
        const std::int64_t other = 424242;
        std::memcpy(data.data() + 16, &other, sizeof other);
        foreign = dir + "/nixl.424242.x.0.mmap";
        std::ofstream(foreign, std::ios::binary) << data;
        REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
      }
    REQUIRE(!foreign.empty());
    text = scrape(port);
    CHECK(text.find("agent_tx_bytes_total{") != std::string::npos);
    CHECK(text.find("pid=\"424242\"") == std::string::npos);
  }

  // The owner goes: another process takes the port (they try again from their export path).
  const pid_t gone = w[owner]->pid();
  w[owner]->kill();
  w[owner].reset();
  int next = -1;
  REQUIRE(wait_until(
      [&] {
        for (auto& p : w)
          if (p) p->ask(ev(telemetry_event::rx_bytes, 1));
        const auto o = owners();
        if (o.size() == 1) next = o[0];
        if (next < 0) pause_a_little();
        return next >= 0;
      },
      std::chrono::seconds(30)));
  CHECK(owners().size() == 1);
  // The dead writer's store is removed once its last update is older than the TTL (1 s).
  REQUIRE(wait_until(
      [&] {
        text = scrape(port);
        const bool ok =
            !text.empty() && text.find("pid=\"" + std::to_string(gone) + "\"") == std::string::npos;
        if (!ok) pause_a_little();
        return ok;
      },
      std::chrono::seconds(30)));
  CHECK(stores_in(dir) == (foreign.empty() ? 2u : 3u));
  if (!foreign.empty()) CHECK(text.find("pid=\"424242\"") == std::string::npos);
  for (int i = 0; i < 3; ++i) {
    if (!w[i]) continue;
    CHECK(sample(text, "agent_tx_bytes_total", "mp-" + std::to_string(i), w[i]->pid()) ==
          1000 * (i + 1));
  }
  w.clear();
}

TEST_CASE("prometheus_mp: a missing or unusable NIXL_TELEMETRY_MULTIPROC_DIR fails the agent") {
  env_guard env;
  env.set("NIXL_TELEMETRY_EXPORTER", "prometheus_mp");
  env.set("NIXL_TELEMETRY_ENABLE", "y");
  ::unsetenv("NIXL_TELEMETRY_MULTIPROC_DIR");
  auto has = [](const std::string& msg, const char* part) {
    CAPTURE(msg);
    return msg.find(part) != std::string::npos;
  };
  CHECK(has(what_of([] { test_agent a("mp-nodir"); }), "NIXL_TELEMETRY_MULTIPROC_DIR"));
  const scratch tmp(fs::temp_directory_path(), "nixl-mp");
  const std::string top = tmp.dir.string();
  { std::ofstream(top + "/file") << "x"; }
  env.set("NIXL_TELEMETRY_MULTIPROC_DIR", top + "/file/sub");
  CHECK(has(what_of([] { test_agent a("mp-baddir"); }),
            "cannot create NIXL_TELEMETRY_MULTIPROC_DIR"));
  env.set("NIXL_TELEMETRY_MULTIPROC_DIR", top + "/file");
  CHECK(has(what_of([] { test_agent a("mp-notdir"); }), "is not a directory"));
  // Telemetry off: no exporter, no error.
  env.set("NIXL_TELEMETRY_ENABLE", "n");
  CHECK_NOTHROW(test_agent("mp-off"));
}

TEST_CASE("prometheus_mp: more than 32 buckets, or a malformed list, fails the agent") {
  env_guard env;
  const scratch tmp(fs::temp_directory_path(), "nixl-mp");
  const std::string top = tmp.dir.string();
  env.set("NIXL_TELEMETRY_EXPORTER", "prometheus_mp");
  env.set("NIXL_TELEMETRY_ENABLE", "y");
  env.set("NIXL_TELEMETRY_MULTIPROC_DIR", top);
  std::string many;
  for (int i = 1; i <= 33; ++i) many += (i > 1 ? "," : "") + std::to_string(i * 10);
  env.set("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US", many);
  CHECK(code_of([] { test_agent a("mp-many"); }) == nixl::status::invalid_param);
  for (const char* bad : {"10,abc", "10,5", "0,10", "10,,20", "inf", "10;20"}) {
    env.set("NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US", bad);
    CAPTURE(bad);
    CHECK(code_of([] { test_agent a("mp-bad"); }) == nixl::status::invalid_param);
  }
  CHECK(stores_in(top) == 0);
}
