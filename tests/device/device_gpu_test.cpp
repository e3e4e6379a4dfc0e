// GPU-initiated transfers on one GPU, in NIXL's device test's layout (test/gtest/device_api:
// two agents in one process, sender agent_0 and receiver agent_1, 4 KiB puts x1000 at each
// level, 32 worker-bound views, a remote view with a NULL_AGENT placeholder and nixlGetPtr),
// through nixl.h's prepMemView and NIXL's nixl_device.cuh; then atomics as completion counters,
// bad indices and released views (an error, not a fault), NIXL's local-view base address, and
// nixl-cpp's own nixl/device.cuh. Each case runs with the CUDA and the UCX backend and skips
// with the reason when there is no GPU (or the backend refuses VRAM). The kernels are in
// device_kernels.cu.

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "device_kernels.hpp"
#include "nixl.h"
#include "nixl_test/catch.hpp"

namespace {

namespace k = nixl_device_test;
using k::level;
constexpr size_t kib4 = 4096;

std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA GPU: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA GPU visible";
  return {};
}

#define NEED_GPU()                            \
  do {                                        \
    const std::string why_ = no_gpu_reason(); \
    if (!why_.empty()) NIXL_SKIP(why_);       \
    REQUIRE(cudaSetDevice(0) == cudaSuccess); \
  } while (0)

/// A cudaMalloc'ed buffer.
struct vbuf {
  explicit vbuf(size_t n) : len(n) {
    REQUIRE(cudaMalloc(&p, n) == cudaSuccess);
    REQUIRE(cudaMemset(p, 0, n) == cudaSuccess);
  }
  ~vbuf() { cudaFree(p); }
  vbuf(const vbuf&) = delete;
  uintptr_t addr() const { return reinterpret_cast<uintptr_t>(p); }
  void fill32(uint32_t v) {
    std::vector<uint32_t> h(len / 4, v);
    REQUIRE(cudaMemcpy(p, h.data(), len, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<uint32_t> read32() const {
    std::vector<uint32_t> h(len / 4);
    REQUIRE(cudaMemcpy(h.data(), p, len, cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
  void* p = nullptr;
  size_t len;
};

nixlAgentConfig agent_cfg() {
  return nixlAgentConfig(true, false, 0, nixl_thread_sync_t::NIXL_THREAD_SYNC_RW, 1, 100000);
}

/// NIXL's test's backend parameters.
bool create_backend(nixlAgent& a, const std::string& backend, nixlBackendH*& b) {
  nixl_b_params_t p;
  if (backend == "UCX") p["num_workers"] = "32";
  return a.createBackend(backend, p, b) == NIXL_SUCCESS;
}

/// Registers [addr, +len) of GPU 0 with `a`.
bool reg_vram(nixlAgent& a, uintptr_t addr, size_t len) {
  nixl_reg_dlist_t l(VRAM_SEG);
  l.addDesc(nixlBlobDesc(addr, len, 0, ""));
  return a.registerMem(l) == NIXL_SUCCESS;
}

nixl_opt_args_t view_opts(nixlBackendH* b, const std::string& custom) {
  nixl_opt_args_t x;
  x.backends.push_back(b);
  x.customParam = custom;
  return x;
}

/// A local view of `bs` through `a`'s backend `b`, as NIXL's tests prepare it.
nixlMemViewH prep_local(nixlAgent& a, nixlBackendH* b, const std::vector<const vbuf*>& bs,
                        const std::string& custom = {}) {
  nixl_xfer_dlist_t l(VRAM_SEG);
  for (const vbuf* v : bs) l.addDesc(nixlBasicDesc(v->addr(), v->len, 0));
  nixlMemViewH h = nullptr;
  auto x = view_opts(b, custom);
  REQUIRE(a.prepMemView(l, h, &x) == NIXL_SUCCESS);
  REQUIRE(h != nullptr);
  return h;
}

/// A remote view of `ds` through `a`'s backend `b`.
nixlMemViewH prep_remote(nixlAgent& a, nixlBackendH* b, const std::vector<nixlRemoteDesc>& ds,
                         const std::string& custom = {}) {
  nixl_remote_dlist_t l(VRAM_SEG);
  for (const auto& d : ds) l.addDesc(d);
  nixlMemViewH h = nullptr;
  auto x = view_opts(b, custom);
  REQUIRE(a.prepMemView(l, h, &x) == NIXL_SUCCESS);
  REQUIRE(h != nullptr);
  return h;
}

/// NIXL's test fixture: agent_0 (sender) and agent_1 (receiver) with one backend each.
struct agents {
  explicit agents(const std::string& backend)
      : a0("agent_0", agent_cfg()), a1("agent_1", agent_cfg()), name(backend) {
    ok = create_backend(a0, backend, b0) && create_backend(a1, backend, b1);
    if (!ok) why = backend + ": createBackend failed";
  }
  ~agents() {
    if (exchanged) {
      CHECK(a0.invalidateRemoteMD("agent_1") == NIXL_SUCCESS);
      CHECK(a1.invalidateRemoteMD("agent_0") == NIXL_SUCCESS);
    }
  }
  /// Registers `b` with `a`; false (with the reason) when the backend refuses VRAM.
  bool reg(nixlAgent& a, const vbuf& b) {
    if (reg_vram(a, b.addr(), b.len)) return true;
    why = name + " does not register VRAM here";
    return false;
  }
  void exchange() {
    nixl_blob_t m0, m1;
    REQUIRE(a0.getLocalMD(m0) == NIXL_SUCCESS);
    REQUIRE(a1.getLocalMD(m1) == NIXL_SUCCESS);
    std::string n0, n1;
    REQUIRE(a1.loadRemoteMD(m0, n0) == NIXL_SUCCESS);
    REQUIRE(a0.loadRemoteMD(m1, n1) == NIXL_SUCCESS);
    REQUIRE(n0 == "agent_0");
    REQUIRE(n1 == "agent_1");
    exchanged = true;
  }
  nixlMemViewH local(const std::vector<const vbuf*>& bs, const std::string& custom = {}) {
    return prep_local(a0, b0, bs, custom);
  }
  /// A remote view of agent_1's buffers; null entries are NULL_AGENT placeholders.
  nixlMemViewH remote(const std::vector<const vbuf*>& bs, const std::string& custom = {}) {
    std::vector<nixlRemoteDesc> ds;
    for (const vbuf* b : bs)
      ds.push_back(b != nullptr ? nixlRemoteDesc(b->addr(), b->len, 0, "agent_1")
                                : nixlRemoteDesc(nixlBasicDesc(), nixl_null_agent));
    return prep_remote(a0, b0, ds, custom);
  }

  nixlAgent a0, a1;
  std::string name;
  nixlBackendH* b0 = nullptr;
  nixlBackendH* b1 = nullptr;
  bool ok = false;
  bool exchanged = false;
  std::string why;
};

#define SETUP_OR_SKIP(cond, ag)       \
  do {                                \
    if (!(cond)) NIXL_SKIP((ag).why); \
  } while (0)

/// The start of a case run for each backend and each level: the GPU or a skip, then NIXL's
/// fixture `ag` with that backend (or a skip) and `lvl` the level.
#define NIXL_CASE_PER_BACKEND_AND_LEVEL(ag, lvl)                       \
  NEED_GPU();                                                          \
  const std::string backend_ = GENERATE("CUDA", "UCX");                \
  const auto lvl = GENERATE(level::thread, level::warp, level::block); \
  INFO(backend_ << " " << k::level_name(lvl));                         \
  agents ag(backend_);                                                 \
  SETUP_OR_SKIP(ag.ok, ag)

/// NIXL's test kernel at level `l`; its error (0: none).
int run_put(level l, k::elem src, k::elem dst, size_t size, int iters) {
  return k::put(l, src, dst, size, iters);
}

std::vector<void*> get_ptrs(nixlMemViewH mvh, size_t n) {
  std::vector<void*> h(n);
  REQUIRE(k::get_ptrs(mvh, n, h.data()) == 0);
  return h;
}

}  // namespace

TEST_CASE("device: SingleWorkerPut, 4 KiB x1000 at each level", "[device][gpu]") {
  NIXL_CASE_PER_BACKEND_AND_LEVEL(ag, level);
  vbuf src(kib4), dst(kib4);
  src.fill32(0);
  const uint32_t mark = 0xDEADBEEF;
  REQUIRE(cudaMemcpy(src.p, &mark, 4, cudaMemcpyHostToDevice) == cudaSuccess);
  SETUP_OR_SKIP(ag.reg(ag.a0, src) && ag.reg(ag.a1, dst), ag);
  ag.exchange();
  nixlMemViewH l = ag.local({&src});
  nixlMemViewH r = ag.remote({&dst});
  CHECK(run_put(level, {l, 0, 0}, {r, 0, 0}, kib4, 1000) == 0);
  CHECK(dst.read32()[0] == 0xDEADBEEF);
  ag.a0.releaseMemView(l);
  ag.a0.releaseMemView(r);
}

TEST_CASE("device: MultipleWorkersPut, 32 worker-bound views", "[device][gpu]") {
  NIXL_CASE_PER_BACKEND_AND_LEVEL(ag, level);
  constexpr int workers = 32;
  std::vector<std::unique_ptr<vbuf>> srcs, dsts;
  for (int w = 0; w < workers; ++w) {
    srcs.push_back(std::make_unique<vbuf>(kib4));
    dsts.push_back(std::make_unique<vbuf>(kib4));
    srcs.back()->fill32(0xDEAD0000u | static_cast<uint32_t>(w));
    SETUP_OR_SKIP(ag.reg(ag.a0, *srcs.back()) && ag.reg(ag.a1, *dsts.back()), ag);
  }
  ag.exchange();
  std::vector<nixlMemViewH> views;
  for (int w = 0; w < workers; ++w) {
    const std::string custom = "worker_id=" + std::to_string(w);
    nixlMemViewH l = ag.local({srcs[w].get()}, custom);
    nixlMemViewH r = ag.remote({dsts[w].get()}, custom);
    views.push_back(l);
    views.push_back(r);
    CHECK(run_put(level, {l, 0, 0}, {r, 0, 0}, kib4, 1) == 0);
  }
  for (int w = 0; w < workers; ++w) {
    const auto got = dsts[w]->read32();
    const uint32_t want = 0xDEAD0000u | static_cast<uint32_t>(w);
    size_t bad = 0;
    for (uint32_t v : got) bad += v != want;
    CHECK(bad == 0);
  }
  for (nixlMemViewH v : views) ag.a0.releaseMemView(v);
}

TEST_CASE("device: SingleWorkerPutGap, a NULL_AGENT placeholder and nixlGetPtr", "[device][gpu]") {
  NIXL_CASE_PER_BACKEND_AND_LEVEL(ag, level);
  vbuf src(kib4), dst(kib4);
  src.fill32(0xDEADBEEF);
  SETUP_OR_SKIP(ag.reg(ag.a0, src) && ag.reg(ag.a1, dst), ag);
  ag.exchange();
  nixlMemViewH l = ag.local({&src});
  nixlMemViewH r = ag.remote({&dst, nullptr});
  CHECK(run_put(level, {l, 0, 0}, {r, 0, 0}, kib4, 1000) == 0);
  CHECK(dst.read32()[kib4 / 4 - 1] == 0xDEADBEEF);
  const auto ptrs = get_ptrs(r, 3);
  CHECK(ptrs[0] == dst.p);    // agent_1 is in this process: its own pointer
  CHECK(ptrs[1] == nullptr);  // the placeholder
  CHECK(ptrs[2] == nullptr);  // past the end
  CHECK(run_put(level, {l, 0, 0}, {r, 1, 0}, 16, 1) == 1000 + NIXL_ERR_BACKEND);
  ag.a0.releaseMemView(l);
  ag.a0.releaseMemView(r);
}

namespace {

void counter_round(level l, nixlMemViewH lv, nixlMemViewH rv, vbuf& dst, vbuf& counter,
                   uint32_t pattern) {
  INFO(k::level_name(l));
  const unsigned long long want = l == level::thread ? 32 : 1;
  const auto got = k::counter_round(l, lv, rv, counter.p, dst.p, pattern, want);
  REQUIRE(got.cuda == 0);
  CHECK(got.producer == 0);
  CHECK(got.verdict == 1);
  CHECK(got.counter == want);
}

}  // namespace

TEST_CASE("device: atomics as completion counters", "[device][gpu]") {
  NEED_GPU();
  const std::string backend = GENERATE("CUDA", "UCX");
  INFO(backend);
  agents ag(backend);
  SETUP_OR_SKIP(ag.ok, ag);
  vbuf src(kib4), dst(kib4), counter(256);
  const uint32_t pattern = 0xC0FFEE00u;
  src.fill32(pattern);
  SETUP_OR_SKIP(ag.reg(ag.a0, src) && ag.reg(ag.a1, dst) && ag.reg(ag.a1, counter), ag);
  ag.exchange();
  nixlMemViewH l = ag.local({&src});
  nixlMemViewH r = ag.remote({&dst, &counter});
  SECTION("THREAD") {
    counter_round(level::thread, l, r, dst, counter, pattern);
  }
  SECTION("WARP") {
    counter_round(level::warp, l, r, dst, counter, pattern);
  }
  SECTION("BLOCK") {
    counter_round(level::block, l, r, dst, counter, pattern);
  }
  ag.a0.releaseMemView(l);
  ag.a0.releaseMemView(r);
}

namespace {

/// The two-process case's layout in the receiver: three 4 KiB slots of data (THREAD, WARP,
/// BLOCK puts) and three u64 counters; slot k carries the words slot_pattern(k).
constexpr unsigned slots = 3;
constexpr uint32_t slot_pattern(unsigned k) {
  return 0x5EED0000u | (k + 1);
}
/// What counter k reaches: THREAD adds once per thread, WARP and BLOCK once.
constexpr unsigned long long slot_count(unsigned k) {
  return k == 0 ? 32 : 1;
}

int run_producer(level l, nixlMemViewH lv, nixlMemViewH rv, unsigned slot) {
  INFO(k::level_name(l));
  return k::producer(l, lv, rv, slot);
}

}  // namespace

// The sender here, the receiver (agent_1) in a second process of this binary
// (nixl_device_test::receive, started through the hidden case "[device_receiver]" of
// device_host_test.cpp): the receiver's VRAM reaches this process through CUDA IPC.
TEST_CASE("device: two processes on GPU 0, puts and counters into a receiver process",
          "[device][gpu]") {
  NEED_GPU();
  namespace t = nixl_device_test;
  using namespace std::chrono_literals;
  const std::string backend = GENERATE("CUDA", "UCX");
  INFO(backend);
  t::child_process child("[device_receiver]", {{"NIXL_DEVICE_RECEIVER", backend}});
  nixlAgent a0("agent_0", agent_cfg());
  nixlBackendH* b0 = nullptr;
  if (!create_backend(a0, backend, b0)) NIXL_SKIP(backend << ": createBackend failed");
  vbuf src(slots * kib4);
  std::vector<uint32_t> words(src.len / 4);
  for (size_t i = 0; i < words.size(); ++i)
    words[i] = slot_pattern(static_cast<unsigned>(i / (kib4 / 4)));
  REQUIRE(cudaMemcpy(src.p, words.data(), src.len, cudaMemcpyHostToDevice) == cudaSuccess);
  if (!reg_vram(a0, src.addr(), src.len)) NIXL_SKIP(backend << " does not register VRAM here");

  std::string frame, why;
  {
    const bool got = child.read_frame(frame, t::steady::now() + 60s, why);
    INFO(why << "; the receiver's output:\n" << child.output());
    REQUIRE(got);
    REQUIRE(frame.size() > 2 * sizeof(uint64_t));
  }
  uint64_t dst = 0, counters = 0;
  std::memcpy(&dst, frame.data(), sizeof dst);
  std::memcpy(&counters, frame.data() + sizeof dst, sizeof counters);
  std::string name;
  REQUIRE(a0.loadRemoteMD(frame.substr(2 * sizeof(uint64_t)), name) == NIXL_SUCCESS);
  REQUIRE(name == "agent_1");
  nixlMemViewH l = prep_local(a0, b0, {&src});
  nixlMemViewH r = prep_remote(a0, b0,
                               {nixlRemoteDesc(dst, slots * kib4, 0, "agent_1"),
                                nixlRemoteDesc(counters, 256, 0, "agent_1")});
  CHECK(get_ptrs(r, 1)[0] != nullptr);  // the receiver's VRAM mapped here
  CHECK(run_producer(level::thread, l, r, 0) == 0);
  CHECK(run_producer(level::warp, l, r, 1) == 0);
  CHECK(run_producer(level::block, l, r, 2) == 0);
  a0.releaseMemView(l);
  a0.releaseMemView(r);
  CHECK(a0.invalidateRemoteMD("agent_1") == NIXL_SUCCESS);
  child.let_go();  // the receiver has the data checked (or is checking it): it may end
  const bool exited = child.wait(t::steady::now() + 60s, why);
  INFO(why << "; the receiver's output:\n" << child.output());
  CHECK(exited);
}

TEST_CASE("device: bad indices and released views are errors, not faults", "[device][gpu]") {
  NEED_GPU();
  const std::string backend = GENERATE("CUDA", "UCX");
  INFO(backend);
  agents ag(backend);
  SETUP_OR_SKIP(ag.ok, ag);
  vbuf src(kib4), dst(kib4);
  SETUP_OR_SKIP(ag.reg(ag.a0, src) && ag.reg(ag.a1, dst), ag);
  ag.exchange();
  nixlMemViewH l = ag.local({&src});
  nixlMemViewH r = ag.remote({&dst});
  nixlMemViewH gone = ag.remote({&dst});
  ag.a0.releaseMemView(gone);
  ag.a0.releaseMemView(gone);  // twice: a warning only
  int h[k::misuse_results] = {};
  REQUIRE(k::misuse(l, r, gone, h) == 0);
  for (int i = 0; i < k::misuse_results; ++i) {
    INFO("case " << i);  // 0-7 through NIXL's API, 8-12 through the native one
    CHECK(h[i] == k::misuse_expected[i]);
  }
  ag.a0.releaseMemView(l);
  ag.a0.releaseMemView(r);
}

TEST_CASE("device: a local view's entries start at their registration (NIXL's addresses)",
          "[device][gpu]") {
  NEED_GPU();
  agents ag("CUDA");
  SETUP_OR_SKIP(ag.ok, ag);
  vbuf src(kib4), dst(kib4);
  std::vector<uint32_t> seq(kib4 / 4);
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<uint32_t>(i);
  REQUIRE(cudaMemcpy(src.p, seq.data(), kib4, cudaMemcpyHostToDevice) == cudaSuccess);
  SETUP_OR_SKIP(ag.reg(ag.a0, src) && ag.reg(ag.a1, dst), ag);
  ag.exchange();
  // The local entry is the second KiB of the registered 4 KiB; the remote one the third.
  nixl_xfer_dlist_t ll(VRAM_SEG);
  ll.addDesc(nixlBasicDesc(src.addr() + 1024, 1024, 0));
  nixlMemViewH l = nullptr;
  REQUIRE(ag.a0.prepMemView(ll, l) == NIXL_SUCCESS);
  nixl_remote_dlist_t rl(VRAM_SEG);
  rl.addDesc(nixlRemoteDesc(dst.addr() + 2048, 1024, 0, "agent_1"));
  nixlMemViewH r = nullptr;
  REQUIRE(ag.a0.prepMemView(rl, r) == NIXL_SUCCESS);
  CHECK(run_put(level::thread, {l, 0, 0}, {r, 0, 0}, 16, 1) == 0);
  const auto got = dst.read32();
  CHECK(got[2048 / 4] == 0);  // src.offset counts from the registration's start
  CHECK(got[2048 / 4 + 3] == 3);
  CHECK(got[0] == 0);
  // A remote entry outside agent_1's registrations is refused.
  nixl_remote_dlist_t out(VRAM_SEG);
  out.addDesc(nixlRemoteDesc(dst.addr() + 2048, 4096, 0, "agent_1"));
  nixlMemViewH x = nullptr;
  CHECK(ag.a0.prepMemView(out, x) == NIXL_ERR_NOT_FOUND);
  // A later entry outside the chosen backend's regions: NIXL's UNKNOWN.
  nixl_remote_dlist_t later(VRAM_SEG);
  later.addDesc(nixlRemoteDesc(dst.addr(), 64, 0, "agent_1"));
  later.addDesc(nixlRemoteDesc(src.addr(), 64, 0, "agent_1"));
  CHECK(ag.a0.prepMemView(later, x) == NIXL_ERR_UNKNOWN);
  ag.a0.releaseMemView(l);
  ag.a0.releaseMemView(r);
}

namespace nixl_device_test {

void* vram_alloc(std::size_t n) {
  void* p = nullptr;
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&p, n) != cudaSuccess) return nullptr;
  return p;
}
void vram_free(void* p) {
  cudaFree(p);
}
void vram_pattern(void* p, void* q, std::size_t n) {
  std::vector<unsigned char> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i % 251);
  REQUIRE(cudaMemcpy(p, h.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemset(q, 0, n) == cudaSuccess);
}
bool vram_equal(const void* a, const void* b, std::size_t n) {
  std::vector<unsigned char> x(n), y(n);
  REQUIRE(cudaMemcpy(x.data(), a, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(y.data(), b, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  return x == y;
}

/// The receiver of the two-process case: agent_1 with `backend`, VRAM for the data and the
/// counters, its metadata to the parent, then the counters awaited (20 s at most) and the data
/// checked. Failures are Catch2's, in the log the parent prints.
void receive(const std::string& backend) {
  using namespace std::chrono_literals;
  INFO("receiver process, " << backend);
  const std::string no_gpu = no_gpu_reason();
  if (!no_gpu.empty()) FAIL(no_gpu);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  nixlAgent a1("agent_1", agent_cfg());
  nixlBackendH* b = nullptr;
  REQUIRE(create_backend(a1, backend, b));
  vbuf dst(slots * kib4), counters(256);
  REQUIRE(reg_vram(a1, dst.addr(), dst.len));
  REQUIRE(reg_vram(a1, counters.addr(), counters.len));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the zeroed buffers, before the sender starts
  nixl_blob_t md;
  REQUIRE(a1.getLocalMD(md) == NIXL_SUCCESS);
  std::string frame(2 * sizeof(uint64_t), '\0');
  const uint64_t addrs[2] = {dst.addr(), counters.addr()};
  std::memcpy(frame.data(), addrs, sizeof addrs);
  frame += md;
  std::string why;
  {
    const bool sent = write_frame(child_fd, frame, why);
    INFO(why);
    REQUIRE(sent);
  }
  ::close(child_fd);
  unsigned long long got[slots] = {};
  bool done = false;
  const auto deadline = steady::now() + 20s;
  while (!done && steady::now() < deadline) {
    REQUIRE(cudaMemcpy(got, counters.p, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
    done = true;
    for (unsigned k = 0; k < slots; ++k) done = done && got[k] >= slot_count(k);
    if (!done) std::this_thread::sleep_for(1ms);
  }
  for (unsigned k = 0; k < slots; ++k) {
    INFO("counter " << k << " is " << got[k] << " after " << (done ? "the wait" : "20 s")
                    << ", want " << slot_count(k));
    CHECK(got[k] == slot_count(k));
  }
  REQUIRE(done);
  const auto words = dst.read32();
  for (unsigned k = 0; k < slots; ++k) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < kib4 / 4; ++i)
      if (words[k * kib4 / 4 + i] != slot_pattern(k) && bad++ == 0) first = i;
    INFO("slot " << k << ": " << bad << " of " << kib4 / 4 << " words wrong, the first at word "
                 << first << " (" << std::hex << words[k * kib4 / 4 + first] << ", want "
                 << slot_pattern(k) << ")");
    CHECK(bad == 0);
  }
  const bool go = wait_let_go(steady::now() + 60s, why);
  INFO(why);
  REQUIRE(go);
}

}  // namespace nixl_device_test
