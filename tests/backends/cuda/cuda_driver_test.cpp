// The process's CUDA driver loader and its one table of CUDA IPC mappings
// (nixl/detail/cuda_driver.hpp, nixl/detail/cuda_ipc.hpp), over the stand-in libcuda.so.1
// (tests/support/fake_cuda): loaded once, one primary context and stream per device, one
// mapping per peer allocation and device, opened on first use and closed with its last user,
// and kept open while idle for a keeper until it lets go.

#include <nixl/detail/cuda_ipc.hpp>

#include "fake_cuda/fake_cuda.hpp"
#include "nixl_test/catch.hpp"

namespace cu = nixl::detail::cu;

namespace {

nixl::test::fake_cuda& fake() {
  return nixl::test::fake_cuda::get();
}

// First in every case: loads the stand-in before the driver is looked for.
#define NEED_FAKE_CUDA() \
  if (!fake().ok()) NIXL_SKIP("the stand-in libcuda.so.1 did not load")

/// Fake VRAM of `n` bytes and its IPC export.
struct allocation {
  unsigned long long p = 0;
  explicit allocation(std::size_t n) { REQUIRE(fake().alloc(&p, n) == 0); }
  ~allocation() { fake().free_(p); }
  allocation(const allocation&) = delete;
  cu::ipc_export exported(std::size_t off, std::size_t len) const {
    std::string err;
    auto x = cu::export_ipc(p + off, len, 0, err);
    INFO(err);
    REQUIRE(x.has_value());
    return *x;
  }
};

}  // namespace

TEST_CASE("cuda driver: loaded once, with a context and stream per device", "[cuda_driver]") {
  NEED_FAKE_CUDA();
  cu::driver* d = cu::usable_driver();
  REQUIRE(d != nullptr);
  CHECK(d == cu::driver_if_loaded());
  CHECK(d == cu::usable_driver());
  CHECK(d->devices == 1);
  CHECK(d->lacks({"cuIpcOpenMemHandle_v2", "cuMemcpyAsync", "cuStreamQuery"}) == nullptr);
  cu::device_res* r = d->device(0);
  REQUIRE(r != nullptr);
  CHECK(r->ctx != nullptr);
  CHECK(r->stream != nullptr);
  CHECK(d->device(0) == r);
  std::string err;
  CHECK(d->device(1, err) == nullptr);
  CHECK(err.find("does not exist") != std::string::npos);
  CHECK(d->clamp(7) == 0);
  CHECK(d->ordinal_of("fake-cuda-gpu-0") == 0);
  CHECK(d->ordinal_of("another-gpu-uuid") == -1);
  CHECK(d->what(719) == "CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure (fake) (719)");
}

TEST_CASE("cuda ipc: exports name the allocation and the region's place in it", "[cuda_driver]") {
  NEED_FAKE_CUDA();
  allocation a(1 << 20);
  const cu::ipc_export x = a.exported(4096, 8192);
  CHECK(x.offset == 4096);
  CHECK(x.alloc_len == 1u << 20);
  CHECK(cu::driver_if_loaded()->ordinal_of(x.uuid.data()) == 0);
  std::string err;
  CHECK_FALSE(cu::export_ipc(a.p + 4096, 1 << 20, 0, err).has_value());  // past its end
  CHECK_FALSE(err.empty());
}

TEST_CASE("cuda ipc: one mapping per allocation, closed with its last user", "[cuda_driver]") {
  NEED_FAKE_CUDA();
  allocation a(1 << 16);
  const cu::ipc_export x = a.exported(0, 1 << 16);
  auto& t = cu::ipc_table::get();
  const long opens = fake().ipc_opens();
  std::string err;
  auto m1 = cu::open_ipc(x.handle, 0, err);
  REQUIRE(m1);
  auto m2 = cu::open_ipc(x.handle, 0, err);  // another region of it, another backend
  REQUIRE(m2);
  const auto v = t.acquire(x.handle, 0, err);  // the CUDA backend's form
  REQUIRE(v.has_value());
  CHECK(fake().ipc_opens() - opens == 1);
  CHECK(fake().ipc_open_now() == 1);
  CHECK(m1->view().base == m2->view().base);
  CHECK(v->base == m1->view().base);
  CHECK(m1->view().size == 1u << 16);
  CHECK(m1->view().stream == cu::driver_if_loaded()->device(0)->stream);
  m1.reset();
  t.release_base(v->base);
  CHECK(fake().ipc_open_now() == 1);
  m2.reset();
  CHECK(fake().ipc_open_now() == 0);
  CHECK(t.open_now() == 0);
  auto again = cu::open_ipc(x.handle, 0, err);  // opened again on the next use
  REQUIRE(again);
  CHECK(fake().ipc_opens() - opens == 2);
  again.reset();
  CHECK(fake().ipc_open_now() == 0);

  cu::ipc_handle bad{};
  CHECK_FALSE(cu::open_ipc(bad, 0, err));
  CHECK(err.find("cuIpcOpenMemHandle") != std::string::npos);
  CHECK_FALSE(t.acquire(x.handle, 3, err).has_value());  // no such device
}

TEST_CASE("cuda ipc: a keeper's mappings stay open while idle, until it lets go", "[cuda_driver]") {
  NEED_FAKE_CUDA();
  allocation a(1 << 16), b(1 << 16);
  const cu::ipc_export xa = a.exported(0, 64), xb = b.exported(0, 64);
  auto& t = cu::ipc_table::get();
  int keeper = 0, other = 0;
  const long opens = fake().ipc_opens();
  std::string err;
  for (int i = 0; i < 3; ++i) {  // one request after another: opened once
    auto m = cu::open_ipc(xa.handle, 0, err, &keeper);
    REQUIRE(m);
  }
  CHECK(fake().ipc_opens() - opens == 1);
  CHECK(fake().ipc_open_now() == 1);
  auto held = cu::open_ipc(xb.handle, 0, err, &keeper);  // in use when the keeper goes
  REQUIRE(held);
  auto m = cu::open_ipc(xa.handle, 0, err);  // a user without keeper shares the idle one
  REQUIRE(m);
  CHECK(fake().ipc_opens() - opens == 2);
  m.reset();
  CHECK(fake().ipc_open_now() == 2);
  t.close_idle(&other);
  CHECK(fake().ipc_open_now() == 2);
  t.close_idle(&keeper);
  CHECK(fake().ipc_open_now() == 1);  // the idle one; the one in use closes with its user
  held.reset();
  CHECK(fake().ipc_open_now() == 0);
  CHECK(t.open_now() == 0);
}
