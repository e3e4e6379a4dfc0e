// Two processes: the target is nixl_libfabric_peer. Data both ways, and a SIGKILLed target seen
// within two seconds.

#include <nixl/agent.hpp>
#include <nixl/backends/libfabric.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "lf_support.hpp"
#include "nixl_test/agent_waits.hpp"

using namespace nixl::test::agent_names;
using lf_test::buffer;
using lf_agent = nixl::agent<nixl::libfabric::backend>;

namespace {

using lf_test::fnv;

// The peer helper on pipes, killed when the test ends; its metadata read at start.
struct peer_process : nixl::test::peer_process {
  explicit peer_process(std::vector<std::string> args)
      : nixl::test::peer_process(NIXL_LIBFABRIC_PEER_EXE, std::move(args), {nullptr, ""}) {}
};

using nixl::test::wait;

}  // namespace

TEST_CASE("libfabric processes: WRITE and READ, notification, then SIGKILL seen within 2 s") {
  const auto prov = GENERATE(std::string("tcp;ofi_rxm"), std::string("shm"));
  const nixl::params p = prov == "shm" ? lf_test::shm_params() : lf_test::tcp_params();
  if (auto why = lf_test::unavailable(p); !why.empty()) NIXL_SKIP(prov << ": " << why);
  CAPTURE(prov);
  const std::size_t n = 4 << 20;
  peer_process peer({"target", std::to_string(n), prov, prov == "shm" ? "" : "lo"});
  buffer b(n);
  lf_agent a{"initiator"};
  a.create_backend<nixl::libfabric::backend>(p);
  a.register_memory(nixl::reg_list<nixl::dram_t>{{{b.addr(), n, 0}, ""}});
  REQUIRE(a.load_remote_metadata(peer.metadata()) == "target");
  const std::uintptr_t remote = [&] {
    // the peer's buffer address: the first registered DRAM region of its metadata
    auto md = nixl::decode_metadata(lf_test::bytes_of(peer.metadata()));
    return md.sections.at(0).regions.at(0).range.addr;
  }();
  // READ the peer's pattern
  auto rd = a.create_request(xfer_op::read, dram_list{{b.addr(), n, 0}}, dram_list{{remote, n, 0}},
                             "target");
  REQUIRE(rd.post() != status::backend);
  REQUIRE(wait(rd) == status::success);
  CHECK(b.holds(7, 0, n, 0));
  // WRITE a new one with a notification
  b.fill(3);
  nixl::xfer_options opt;
  opt.notif = "written";
  auto wr = a.create_request(xfer_op::write, dram_list{{b.addr(), n, 0}}, dram_list{{remote, n, 0}},
                             "target", opt);
  REQUIRE(wr.post() != status::backend);
  REQUIRE(wait(wr) == status::success);
  CHECK(peer.ask("NOTIFS 1") == "N 1");
  char want[32];
  std::snprintf(want, sizeof want, "SUM %llx", static_cast<unsigned long long>(fnv(b.data(), n)));
  CHECK(peer.ask(fmt::format("SUM 0 {}", n)) == want);

  // SIGKILL: the next request fails within 2 s (heartbeat timeout or a connection error), or
  // the longer heartbeat timeout plus 0.8 s under a sanitizer
  const auto limit = lf_test::peer_timeout + std::chrono::milliseconds(800);
  peer.kill();
  const auto t0 = std::chrono::steady_clock::now();
  status s = status::in_progress;
  while (std::chrono::steady_clock::now() - t0 < limit + std::chrono::seconds(3)) {
    s = wr.post();
    if (s == status::in_progress || s == status::success) s = wait(wr, std::chrono::seconds(5));
    if (s != status::success) break;
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(s == status::remote_disconnect);
  CHECK(took < limit);
  WARN(prov << ": dead peer seen after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
}
