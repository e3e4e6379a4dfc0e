// The same behaviour asked of every backend of one shape: remote DRAM movers, and DRAM <-> FILE
// movers. Each enabled backend runs the same test bodies.
#include <nixl/agent.hpp>
#if defined(NIXL_HAS_UCX)
#include <nixl/backends/ucx.hpp>
#endif
#if defined(NIXL_HAS_POSIX)
#include <nixl/backends/posix.hpp>
#endif

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "nixl_test/catch.hpp"
#include "nixl_test/fixtures.hpp"

using nixl::status;
using nixl::xfer_op;
using nixl::test::buffer;

using remote_dram_backends = std::tuple<nixl::test::memcpy_backend
#if defined(NIXL_HAS_UCX)
                                        ,
                                        nixl::ucx::backend
#endif
                                        >;
using file_backends = std::tuple<nixl::test::file_backend
#if defined(NIXL_HAS_POSIX)
                                 ,
                                 nixl::posix::backend
#endif
                                 >;

namespace {
template <class R>
status finish(R& r) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto s = r.status();
  while (s == status::in_progress && std::chrono::steady_clock::now() < deadline) s = r.status();
  return s;
}

template <class Agent>
std::vector<std::string> wait_notifs(Agent& a, const std::string& from, std::size_t n) {
  nixl::notif_map m;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (m[from].size() < n && std::chrono::steady_clock::now() < deadline) {
    a.notifications(m);
    if (m[from].size() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return m[from];
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("remote DRAM: write, read, notify, refuse outside regions", "[conformance]",
                        remote_dram_backends) {
  using B = TestType;
  using A = nixl::agent<B>;
  A a("conf-initiator"), b("conf-target");
  a.template create_backend<B>();
  b.template create_backend<B>();
  constexpr std::size_t n = 1000, block = 96;
  buffer src(n * block), dst(n * block, 0), back(n * block, 0);
  src.iota(7);
  a.register_memory(src.reg());
  a.register_memory(back.reg());
  b.register_memory(dst.reg());
  a.load_remote_metadata(b.local_metadata());
  b.load_remote_metadata(a.local_metadata());

  // scattered on the local side (every other block reversed) so nothing merges
  nixl::xfer_list<nixl::dram_t> l, r;
  for (std::size_t i = 0; i < n; ++i) {
    l.push_back({src.addr((n - 1 - i) * block), block, 0});
    r.push_back({dst.addr(i * block), block, 0});
  }
  auto w = a.create_request(xfer_op::write, l, r, "conf-target", {.notif = std::string("w\0x", 3)});
  CHECK(w.descriptor_count() == n);
  auto s = w.post();
  REQUIRE(nixl::ok(s));
  if (s == status::in_progress) s = finish(w);
  REQUIRE(s == status::success);
  auto got = wait_notifs(b, "conf-initiator", 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == std::string("w\0x", 3));
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(std::equal(src.bytes.begin() + (n - 1 - i) * block, src.bytes.begin() + (n - i) * block,
                       dst.bytes.begin() + i * block));

  auto rd = a.create_request(xfer_op::read, back.whole(), dst.whole(), "conf-target");
  s = rd.post();
  if (s == status::in_progress) s = finish(rd);
  REQUIRE(s == status::success);
  CHECK(back.bytes == dst.bytes);

  // repost of a completed request, then standalone notifications both ways
  s = rd.post();
  if (s == status::in_progress) s = finish(rd);
  CHECK(s == status::success);
  a.notify("conf-target", "ping");
  CHECK(wait_notifs(b, "conf-initiator", 1) == std::vector<std::string>{"ping"});

  nixl::xfer_list<nixl::dram_t> outside{{dst.addr(n * block - 8), 16, 0}};
  nixl::xfer_list<nixl::dram_t> small{{src.addr(), 16, 0}};
  CHECK_THROWS_AS(a.create_request(xfer_op::write, small, outside, "conf-target"), nixl::error);
}

TEMPLATE_LIST_TEST_CASE("DRAM <-> FILE: write then read back", "[conformance]", file_backends) {
  using B = TestType;
  nixl::agent<B> a("conf-files");
  a.template create_backend<B>();
  char path[] = "/tmp/nixl-conformance-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  constexpr std::size_t n = 64, block = 4096;
  buffer mem(n * block), back(n * block, 0);
  mem.iota(1);
  a.register_memory(mem.reg());
  a.register_memory(back.reg());
  a.register_memory(nixl::reg_list<nixl::file_t>{{{0, 0, static_cast<std::uint64_t>(fd)}, path}});
  nixl::xfer_list<nixl::file_t> f;
  for (std::size_t i = 0; i < n; ++i)
    f.push_back({(n - 1 - i) * block, block, static_cast<std::uint64_t>(fd)});
  auto w = a.create_request(xfer_op::write, mem.blocks(n, block), f, "conf-files");
  auto s = w.post();
  if (s == status::in_progress) s = finish(w);
  REQUIRE(s == status::success);
  auto r = a.create_request(xfer_op::read, back.blocks(n, block), f, "conf-files");
  s = r.post();
  if (s == status::in_progress) s = finish(r);
  REQUIRE(s == status::success);
  CHECK(mem.bytes == back.bytes);
  ::close(fd);
  ::unlink(path);
}
