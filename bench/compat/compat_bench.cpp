// What NIXL's C++ API (nixlAgent) and C API (libnixl_capi.so) add per post + status over the
// template agent's run-time path (nixl::agent<...>::xfer_request), the three driven the same way:
//
//   *_refused: post + status of a request whose peer was invalidated. Post goes the whole way
//     through every layer (handle checks, notification choice, the request's lock and peer
//     check) and returns NIXL_ERR_NOT_FOUND before any backend work; status returns the sticky
//     result. No transport time: the difference between layers is what the layers cost.
//   *_status: status of a finished request (sticky): the per-call cost of each layer alone.
//   *_loopback: 64-byte UCX WRITE to the agent itself, post + status until done: the layers'
//     cost next to a real transfer.
//
//   nixl_compat_bench [--benchmark_filter=...] [--benchmark_repetitions=N]

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nixl/nixl.hpp>

#include "nixl.h"
#include "nixl_capi.h"

namespace {

using agent_t = nixl::agent_over<nixl::enabled_backends>;

struct bytes {
  std::vector<unsigned char> v = std::vector<unsigned char>(1 << 16, 1);
  std::uintptr_t addr(std::size_t off = 0) {
    return reinterpret_cast<std::uintptr_t>(v.data()) + off;
  }
};

// -- template agent ---------------------------------------------------------------------------

struct template_side {
  template_side() : a("tpl-a"), b("tpl-b") {
    a.create_backend("UCX");
    b.create_backend("UCX");
    a.register_memory(nixl::reg_dlist(nixl::mem_kind::dram, {{{src.addr(), 4096, 0}, ""}}));
    b.register_memory(nixl::reg_dlist(nixl::mem_kind::dram, {{{dst.addr(), 4096, 0}, ""}}));
    a.load_remote_metadata(b.local_metadata());
    const nixl::xfer_dlist l(nixl::mem_kind::dram, {{src.addr(), 64, 0}});
    const nixl::xfer_dlist self(nixl::mem_kind::dram, {{src.addr(2048), 64, 0}});
    const nixl::xfer_dlist r(nixl::mem_kind::dram, {{dst.addr(), 64, 0}});
    loop = a.create_request(nixl::xfer_op::write, l, self, "tpl-a");
    refused = a.create_request(nixl::xfer_op::write, l, r, "tpl-b");
    a.invalidate_remote_metadata("tpl-b");
  }
  bytes src, dst;
  agent_t a, b;
  agent_t::xfer_request loop, refused;
};

template_side& tpl() {
  static template_side s;
  return s;
}

void template_refused(benchmark::State& st) {
  auto& r = tpl().refused;
  for (auto _ : st) {
    benchmark::DoNotOptimize(r.post());
    benchmark::DoNotOptimize(r.status());
  }
}
void template_status(benchmark::State& st) {
  auto& r = tpl().loop;
  auto s = r.post();
  while (s == nixl::status::in_progress) s = r.status();
  for (auto _ : st) benchmark::DoNotOptimize(r.status());
}
void template_loopback(benchmark::State& st) {
  auto& r = tpl().loop;
  for (auto _ : st) {
    auto s = r.post();
    while (s == nixl::status::in_progress) s = r.status();
    if (s != nixl::status::success) st.SkipWithError("transfer failed");
  }
}

// -- nixlAgent --------------------------------------------------------------------------------

struct cpp_side {
  cpp_side() : a("cpp-a", nixlAgentConfig(true)), b("cpp-b", nixlAgentConfig(true)) {
    nixlBackendH* h = nullptr;
    ok = a.createBackend("UCX", {}, h) == NIXL_SUCCESS &&
         b.createBackend("UCX", {}, h) == NIXL_SUCCESS;
    nixl_reg_dlist_t ra(DRAM_SEG), rb(DRAM_SEG);
    ra.addDesc(nixlBlobDesc(src.addr(), 4096, 0, ""));
    rb.addDesc(nixlBlobDesc(dst.addr(), 4096, 0, ""));
    ok = ok && a.registerMem(ra) == NIXL_SUCCESS && b.registerMem(rb) == NIXL_SUCCESS;
    nixl_blob_t md;
    std::string name;
    ok = ok && b.getLocalMD(md) == NIXL_SUCCESS && a.loadRemoteMD(md, name) == NIXL_SUCCESS;
    nixl_xfer_dlist_t l(DRAM_SEG), self(DRAM_SEG), r(DRAM_SEG);
    l.addDesc(nixlBasicDesc(src.addr(), 64, 0));
    self.addDesc(nixlBasicDesc(src.addr(2048), 64, 0));
    r.addDesc(nixlBasicDesc(dst.addr(), 64, 0));
    ok = ok && a.createXferReq(NIXL_WRITE, l, self, "cpp-a", loop) == NIXL_SUCCESS &&
         a.createXferReq(NIXL_WRITE, l, r, "cpp-b", refused) == NIXL_SUCCESS &&
         a.invalidateRemoteMD("cpp-b") == NIXL_SUCCESS;
  }
  bytes src, dst;
  nixlAgent a, b;
  nixlXferReqH* loop = nullptr;
  nixlXferReqH* refused = nullptr;
  bool ok = false;
};

cpp_side& cpp() {
  static cpp_side s;
  return s;
}

void compat_refused(benchmark::State& st) {
  auto& c = cpp();
  if (!c.ok) return st.SkipWithError("setup failed");
  for (auto _ : st) {
    benchmark::DoNotOptimize(c.a.postXferReq(c.refused));
    benchmark::DoNotOptimize(c.a.getXferStatus(c.refused));
  }
}
void compat_status(benchmark::State& st) {
  auto& c = cpp();
  if (!c.ok) return st.SkipWithError("setup failed");
  auto s = c.a.postXferReq(c.loop);
  while (s == NIXL_IN_PROG) s = c.a.getXferStatus(c.loop);
  for (auto _ : st) benchmark::DoNotOptimize(c.a.getXferStatus(c.loop));
}
void compat_loopback(benchmark::State& st) {
  auto& c = cpp();
  if (!c.ok) return st.SkipWithError("setup failed");
  for (auto _ : st) {
    auto s = c.a.postXferReq(c.loop);
    while (s == NIXL_IN_PROG) s = c.a.getXferStatus(c.loop);
    if (s != NIXL_SUCCESS) st.SkipWithError("transfer failed");
  }
}

// -- C API ------------------------------------------------------------------------------------

struct c_side {
  c_side() {
    nixl_capi_params_t p = nullptr;
    nixl_capi_backend_t h = nullptr;
    ok = nixl_capi_create_agent("c-a", &a) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_agent("c-b", &b) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_params(&p) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_backend(a, "UCX", p, &h) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_backend(b, "UCX", p, &h) == NIXL_CAPI_SUCCESS;
    nixl_capi_reg_dlist_t ra = nullptr, rb = nullptr;
    ok = ok && nixl_capi_create_reg_dlist(NIXL_CAPI_MEM_DRAM, &ra) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_reg_dlist(NIXL_CAPI_MEM_DRAM, &rb) == NIXL_CAPI_SUCCESS &&
         nixl_capi_reg_dlist_add_desc(ra, src.addr(), 4096, 0, nullptr, 0) == NIXL_CAPI_SUCCESS &&
         nixl_capi_reg_dlist_add_desc(rb, dst.addr(), 4096, 0, nullptr, 0) == NIXL_CAPI_SUCCESS &&
         nixl_capi_register_mem(a, ra, nullptr) == NIXL_CAPI_SUCCESS &&
         nixl_capi_register_mem(b, rb, nullptr) == NIXL_CAPI_SUCCESS;
    void* md = nullptr;
    size_t len = 0;
    char* name = nullptr;
    ok = ok && nixl_capi_get_local_md(b, &md, &len) == NIXL_CAPI_SUCCESS &&
         nixl_capi_load_remote_md(a, md, len, &name) == NIXL_CAPI_SUCCESS;
    std::free(md);
    std::free(name);
    nixl_capi_xfer_dlist_t l = nullptr, self = nullptr, r = nullptr;
    ok = ok && nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_DRAM, &l) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_DRAM, &self) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_DRAM, &r) == NIXL_CAPI_SUCCESS &&
         nixl_capi_xfer_dlist_add_desc(l, src.addr(), 64, 0) == NIXL_CAPI_SUCCESS &&
         nixl_capi_xfer_dlist_add_desc(self, src.addr(2048), 64, 0) == NIXL_CAPI_SUCCESS &&
         nixl_capi_xfer_dlist_add_desc(r, dst.addr(), 64, 0) == NIXL_CAPI_SUCCESS &&
         nixl_capi_create_xfer_req(a, NIXL_CAPI_XFER_OP_WRITE, l, self, "c-a", &loop, nullptr) ==
             NIXL_CAPI_SUCCESS &&
         nixl_capi_create_xfer_req(a, NIXL_CAPI_XFER_OP_WRITE, l, r, "c-b", &refused, nullptr) ==
             NIXL_CAPI_SUCCESS &&
         nixl_capi_invalidate_remote_md(a, "c-b") == NIXL_CAPI_SUCCESS;
  }
  bytes src, dst;
  nixl_capi_agent_t a = nullptr, b = nullptr;
  nixl_capi_xfer_req_t loop = nullptr, refused = nullptr;
  bool ok = false;
};

c_side& capi() {
  static c_side s;
  return s;
}

void capi_refused(benchmark::State& st) {
  auto& c = capi();
  if (!c.ok) return st.SkipWithError("setup failed");
  for (auto _ : st) {
    benchmark::DoNotOptimize(nixl_capi_post_xfer_req(c.a, c.refused, nullptr));
    benchmark::DoNotOptimize(nixl_capi_get_xfer_status(c.a, c.refused));
  }
}
void capi_status(benchmark::State& st) {
  auto& c = capi();
  if (!c.ok) return st.SkipWithError("setup failed");
  auto s = nixl_capi_post_xfer_req(c.a, c.loop, nullptr);
  while (s == NIXL_CAPI_IN_PROG) s = nixl_capi_get_xfer_status(c.a, c.loop);
  for (auto _ : st) benchmark::DoNotOptimize(nixl_capi_get_xfer_status(c.a, c.loop));
}
void capi_loopback(benchmark::State& st) {
  auto& c = capi();
  if (!c.ok) return st.SkipWithError("setup failed");
  for (auto _ : st) {
    auto s = nixl_capi_post_xfer_req(c.a, c.loop, nullptr);
    while (s == NIXL_CAPI_IN_PROG) s = nixl_capi_get_xfer_status(c.a, c.loop);
    if (s != NIXL_CAPI_SUCCESS) st.SkipWithError("transfer failed");
  }
}

}  // namespace

BENCHMARK(template_refused);
BENCHMARK(compat_refused);
BENCHMARK(capi_refused);
BENCHMARK(template_status);
BENCHMARK(compat_status);
BENCHMARK(capi_status);
BENCHMARK(template_loopback);
BENCHMARK(compat_loopback);
BENCHMARK(capi_loopback);

BENCHMARK_MAIN();
