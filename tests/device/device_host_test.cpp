// Memory views on the host, without a GPU: prepMemView's errors (NIXL's NOT_FOUND rules for
// unknown agents, placeholder-only lists and unregistered memory), customParam checks, and the
// release of a handle nobody handed out. The GPU cases are in device_gpu_test.cu.

#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/cuda.hpp>
#include <nixl/backends/ucx.hpp>

#include "child_process.hpp"
#include "nixl.h"
#include "nixl_test/catch.hpp"

// The backends' remote regions have what nixl/agent/views.hpp reads to reach a peer's VRAM
// from a kernel (a change there must not silently turn views into not_supported).
static_assert(requires(const nixl::cuda::backend::remote_region& r) {
  r.access;
  r.reachable;
  r.device_access;
  r.addr;
});
static_assert(requires(const nixl::ucx::backend::remote_region& r) {
  r.peer->is_self;
  r.peer->local_alive;
  r.ipc->x.uuid;
  r.range;
});

namespace {

/// Two agents (no backend needed for these errors) that know each other when `exchange`.
struct pair {
  pair() : a("a", nixlAgentConfig(true)), b("b", nixlAgentConfig(true)) {}
  nixlAgent a, b;
};

/// A remote list of `t` holding `d`.
nixl_remote_dlist_t remote_list(nixl_mem_t t, std::initializer_list<nixlRemoteDesc> d) {
  nixl_remote_dlist_t l(t);
  for (const auto& x : d) l.addDesc(x);
  return l;
}

}  // namespace

TEST_CASE("device: remote views follow NIXL's NOT_FOUND rules", "[device]") {
  pair p;
  nixlMemViewH h = reinterpret_cast<nixlMemViewH>(0x1);

  SECTION("an agent whose metadata is not loaded") {
    CHECK(p.a.prepMemView(remote_list(VRAM_SEG, {{0x1000, 4096, 0, "nobody"}}), h) ==
          NIXL_ERR_NOT_FOUND);
  }
  SECTION("placeholders only") {
    CHECK(p.a.prepMemView(
              remote_list(VRAM_SEG, {{0, 0, 0, nixl_null_agent}, {0, 0, 0, "NULL_AGENT"}}), h) ==
          NIXL_ERR_NOT_FOUND);
  }
  SECTION("an empty list") {
    CHECK(p.a.prepMemView(remote_list(VRAM_SEG, {}), h) == NIXL_ERR_NOT_FOUND);
  }
  SECTION("a placeholder then an unknown agent: the real entry decides") {
    CHECK(p.a.prepMemView(
              remote_list(VRAM_SEG, {{0, 0, 0, nixl_null_agent}, {0x1000, 64, 0, "nobody"}}), h) ==
          NIXL_ERR_NOT_FOUND);
  }
  SECTION("memory other than VRAM") {  // no backend makes DRAM views
    CHECK(p.a.prepMemView(remote_list(DRAM_SEG, {{0x1000, 64, 0, "b"}}), h) == NIXL_ERR_NOT_FOUND);
  }
  CHECK(h == nullptr);  // a failed call leaves the out-handle null
}

TEST_CASE("device: local views need registered VRAM", "[device]") {
  pair p;
  nixlMemViewH h = nullptr;
  nixl_xfer_dlist_t l(VRAM_SEG);
  l.addDesc(nixlBasicDesc(0x1000, 4096, 0));
  CHECK(p.a.prepMemView(l, h) == NIXL_ERR_NOT_FOUND);
  CHECK(h == nullptr);

  nixl_xfer_dlist_t d(DRAM_SEG);
  d.addDesc(nixlBasicDesc(0x1000, 4096, 0));
  CHECK(p.a.prepMemView(d, h) == NIXL_ERR_NOT_FOUND);
}

TEST_CASE("device: customParam worker_id=N is accepted, a bad one refused", "[device]") {
  pair p;
  nixlMemViewH h = nullptr;
  nixl_xfer_dlist_t l(VRAM_SEG);
  l.addDesc(nixlBasicDesc(0x1000, 4096, 0));
  nixl_opt_args_t x;
  x.customParam = "worker_id=7";
  CHECK(p.a.prepMemView(l, h, &x) == NIXL_ERR_NOT_FOUND);  // the rules, not the parameter
  x.customParam = "worker_id=seven";
  CHECK(p.a.prepMemView(l, h, &x) == NIXL_ERR_INVALID_PARAM);
}

TEST_CASE("device: releasing a handle nobody handed out only warns", "[device]") {
  pair p;
  p.a.releaseMemView(nullptr);
  int x = 0;
  p.a.releaseMemView(&x);
  p.b.releaseMemView(reinterpret_cast<nixlMemViewH>(0xdead));
  SUCCEED();
}

// The native host API (nixl::agent::prepare_view over typed lists) and device API
// (nixl/device.cuh), on a GPU: the launch is in device_gpu_test.cu.
namespace nixl_device_test {
/// Allocates `n` bytes of VRAM on GPU 0 (null without a GPU).
void* vram_alloc(std::size_t n);
void vram_free(void* p);
/// Fills `p` with bytes i % 251 and zeroes `q`.
void vram_pattern(void* p, void* q, std::size_t n);
/// Puts [src_off, +n) of entry 0 of `l` to [dst_off, +n) of entry 0 of `r` at warp level with
/// nixl::device::put; returns its result, then whether `dst` holds what `src` held there.
int native_put(void* l, std::size_t src_off, void* r, std::size_t dst_off, std::size_t n);
bool vram_equal(const void* a, const void* b, std::size_t n);
}  // namespace nixl_device_test

TEST_CASE("device: native views over typed VRAM lists use the entries' own addresses",
          "[device][gpu]") {
  namespace t = nixl_device_test;
  if (nixl::cuda::backend::device_count() == 0)
    NIXL_SKIP("no GPU: " << nixl::cuda::backend::no_device_reason());
  using agent = nixl::agent<nixl::cuda::backend>;
  agent a("native_a"), b("native_b");
  a.create_backend<nixl::cuda::backend>();
  b.create_backend<nixl::cuda::backend>();
  constexpr std::size_t n = 4096;
  void* src = t::vram_alloc(n);
  void* dst = t::vram_alloc(n);
  REQUIRE(src != nullptr);
  REQUIRE(dst != nullptr);
  t::vram_pattern(src, dst, n);
  const auto sa = reinterpret_cast<std::uintptr_t>(src);
  const auto da = reinterpret_cast<std::uintptr_t>(dst);
  a.register_memory(nixl::reg_list<nixl::vram_t>{{{sa, n, 0}, ""}});
  b.register_memory(nixl::reg_list<nixl::vram_t>{{{da, n, 0}, ""}});
  a.load_remote_metadata(b.local_metadata());
  {
    // Local entry: the second KiB; remote entry: the third.
    void* l = a.prepare_view(nixl::xfer_list<nixl::vram_t>{{sa + 1024, 1024, 0}});
    const std::vector<nixl::remote_entry> rl{{"native_b", {da + 2048, 1024, 0}}};
    void* r = a.prepare_view(nixl::vram, rl);
    CHECK(t::native_put(l, 16, r, 32, 256) == 0);
    CHECK(t::vram_equal(static_cast<char*>(src) + 1024 + 16, static_cast<char*>(dst) + 2048 + 32,
                        256));
    CHECK(t::native_put(l, 1000, r, 0, 64) != 0);  // past the 1 KiB entry
    CHECK(a.release_view(l));
    CHECK(a.release_view(r));
    CHECK_FALSE(a.release_view(r));
  }
  t::vram_free(src);
  t::vram_free(dst);
}

// The two-process cases' second process: this binary, started by nixl_device_test::child_process
// with NIXL_DEVICE_RECEIVER naming its role. "echo", "fail" and "hang" test the process
// handling itself (no GPU); a backend name runs the receiver of device_gpu_test.cu.
namespace nixl_device_test {
void receive(const std::string& backend);
}

TEST_CASE("device: the receiver process of the two-process cases", "[.][device_receiver]") {
  namespace t = nixl_device_test;
  const char* role = std::getenv("NIXL_DEVICE_RECEIVER");
  if (role == nullptr) NIXL_SKIP("runs only in a process that a two-process case started");
  if (!t::die_with_parent()) FAIL("the process that started this receiver is gone");
  const std::string r = role;
  if (r == "echo" || r == "fail" || r == "hang") {
    std::string why;
    const bool sent = t::write_frame(t::child_fd, "ready", why);
    INFO(why);
    REQUIRE(sent);
    ::close(t::child_fd);
    if (r == "fail") FAIL("the receiver fails on purpose");
    if (r == "hang") std::this_thread::sleep_for(std::chrono::seconds(120));
    const bool go = t::wait_let_go(t::steady::now() + std::chrono::seconds(60), why);
    INFO(why);
    REQUIRE(go);
    return;
  }
  t::receive(r);
}

TEST_CASE("device: a receiver process sends its frame, reports its exit, dies at a deadline",
          "[device]") {
  namespace t = nixl_device_test;
  using namespace std::chrono_literals;
  const std::string role = GENERATE("echo", "fail", "hang");
  INFO(role);
  t::child_process c("[device_receiver]", {{"NIXL_DEVICE_RECEIVER", role}});
  std::string frame, why;
  {
    const bool got = c.read_frame(frame, t::steady::now() + 60s, why);
    INFO(why << "; its output:\n" << c.output());
    REQUIRE(got);
  }
  CHECK(frame == "ready");
  c.let_go();
  const auto limit = role == "hang" ? 300ms : 60s;
  const auto t0 = t::steady::now();
  const bool ok = c.wait(t0 + limit, why);
  INFO(why << "; its output:\n" << c.output());
  CHECK_FALSE(c.running());
  if (role == "echo") {
    CHECK(ok);
  } else if (role == "fail") {
    CHECK_FALSE(ok);
    CHECK(why.find("exited with status") != std::string::npos);
    CHECK(c.output().find("the receiver fails on purpose") != std::string::npos);
  } else {
    CHECK_FALSE(ok);
    CHECK(why.find("killed") != std::string::npos);
    CHECK(t::steady::now() - t0 < 30s);
  }
}
