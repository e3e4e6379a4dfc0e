// Memory views on the host, without a GPU: prepMemView's errors (NIXL's NOT_FOUND rules for
// unknown agents, placeholder-only lists and unregistered memory), customParam checks, and the
// release of a handle nobody handed out. The GPU cases are in device_gpu_test.cu.

#include <string>
#include <vector>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/ucx.hpp>

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

}  // namespace

TEST_CASE("device: remote views follow NIXL's NOT_FOUND rules", "[device]") {
  pair p;
  nixlMemViewH h = reinterpret_cast<nixlMemViewH>(0x1);

  SECTION("an agent whose metadata is not loaded") {
    nixl_remote_dlist_t l(VRAM_SEG);
    l.addDesc(nixlRemoteDesc(0x1000, 4096, 0, "nobody"));
    CHECK(p.a.prepMemView(l, h) == NIXL_ERR_NOT_FOUND);
  }
  SECTION("placeholders only") {
    nixl_remote_dlist_t l(VRAM_SEG);
    l.addDesc(nixlRemoteDesc(0, 0, 0, nixl_null_agent));
    l.addDesc(nixlRemoteDesc(0, 0, 0, "NULL_AGENT"));
    CHECK(p.a.prepMemView(l, h) == NIXL_ERR_NOT_FOUND);
  }
  SECTION("an empty list") {
    nixl_remote_dlist_t l(VRAM_SEG);
    CHECK(p.a.prepMemView(l, h) == NIXL_ERR_NOT_FOUND);
  }
  SECTION("a placeholder then an unknown agent: the real entry decides") {
    nixl_remote_dlist_t l(VRAM_SEG);
    l.addDesc(nixlRemoteDesc(0, 0, 0, nixl_null_agent));
    l.addDesc(nixlRemoteDesc(0x1000, 64, 0, "nobody"));
    CHECK(p.a.prepMemView(l, h) == NIXL_ERR_NOT_FOUND);
  }
  SECTION("memory other than VRAM") {
    nixl_remote_dlist_t l(DRAM_SEG);
    l.addDesc(nixlRemoteDesc(0x1000, 64, 0, "b"));
    CHECK(p.a.prepMemView(l, h) == NIXL_ERR_NOT_FOUND);  // no backend makes DRAM views
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
