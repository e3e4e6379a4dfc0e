// OBJ and AZURE_BLOB VRAM staging against s3rver and azurite where there is no GPU, with a
// stand-in for the CUDA driver (tests/support/fake_cuda, loaded by its path first, so that it is
// the libcuda.so.1 the backends find): its "device memory" is host memory it handed out and its
// copies end late, so the backends' whole VRAM path runs: data checked through the pool of the
// default size and of the smallest allowed, a descriptor larger than the pool, many
// descriptors, ranged READs into a sub-range, one pool allocated per backend, CUDA errors named
// in the request's message, a copy that never ends (a bounded wait, then its chunk kept out of
// the pool, then a clear "no room" rather than a hang), host memory and a too small pool
// refused at registration.

#include <cstring>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>

#include "fake_cuda/fake_cuda.hpp"
#include "obj_vram_support.hpp"

using namespace obj_test;

namespace {

nixl::test::fake_cuda& fake() {
  return nixl::test::fake_cuda::get();
}

/// `n` bytes of fake VRAM, zeroed, which the test reads and writes directly.
struct vbuf {
  std::size_t n;
  unsigned long long p = 0;
  explicit vbuf(std::size_t bytes) : n(bytes) {
    REQUIRE(fake().alloc(&p, n) == 0);
    std::memset(data(), 0, n);
  }
  ~vbuf() { fake().free_(p); }
  vbuf(const vbuf&) = delete;
  std::byte* data() const { return reinterpret_cast<std::byte*>(p); }
  std::uintptr_t addr(std::size_t off = 0) const { return static_cast<std::uintptr_t>(p) + off; }
  void put(const std::vector<std::byte>& v) { std::memcpy(data(), v.data(), v.size()); }
  bool same(std::size_t off, const std::byte* src, std::size_t len) const {
    return std::memcmp(data() + off, src, len) == 0;
  }
};

#define OBJ_FAKE_START(K, srv)                                           \
  if (!fake().ok()) NIXL_SKIP("the stand-in libcuda.so.1 did not load"); \
  fake().fail_next(0);                                                   \
  server srv(K::server);                                                 \
  NIXL_REQUIRE_SERVER(srv)

template <class K>
void round_trips() {
  OBJ_FAKE_START(K, srv);
  const std::string pool = GENERATE(std::string(), std::string("16777216"));
  auto p = K::params(srv.endpoint(), "20000");
  if (!pool.empty()) p["vram_staging_bytes"] = pool;
  INFO("vram_staging_bytes " << (pool.empty() ? "default" : pool));
  const std::size_t host_before = fake().host_bytes();
  {
    vrig<K, vbuf> r(p);
    const std::vector<std::size_t> sizes = {1, 4096, 64u << 20};
    const auto devs = r.objects({"fv-one", "fv/four kib", "fv-big"});
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      INFO("size " << sizes[i]);
      const auto data = pattern(sizes[i], static_cast<std::uint32_t>(i + 41));
      vbuf src(sizes[i]), dst(sizes[i]);
      src.put(data);
      r.vram(src);
      r.vram(dst);
      const long c0 = fake().copies();
      auto w = r.vrequest(nixl::xfer_op::write, src, {{0, devs[i], 0, sizes[i]}});
      REQUIRE(run(w) == nixl::status::success);
      auto rd = r.vrequest(nixl::xfer_op::read, dst, {{0, devs[i], 0, sizes[i]}});
      REQUIRE(run(rd) == nixl::status::success);
      CHECK(dst.same(0, data.data(), sizes[i]));
      // 64 MiB: 8 parts up and 8 pieces down; else one body each way.
      CHECK(fake().copies() - c0 == (sizes[i] > (16u << 20) ? 16 : 2));
      std::vector<std::byte> host(sizes[i]);
      r.memory(host);
      auto rh = r.request(nixl::xfer_op::read, host, {{0, devs[i], 0, sizes[i]}});
      REQUIRE(run(rh) == nixl::status::success);
      CHECK(host == data);
    }
    // One pinned pool for the backend, of the size asked for.
    CHECK(fake().host_bytes() - host_before == (pool.empty() ? 64u << 20 : 16u << 20));
  }
  CHECK(fake().host_bytes() == host_before);  // freed with the backend
}

template <class K>
void many_and_ranges() {
  OBJ_FAKE_START(K, srv);
  auto p = K::params(srv.endpoint(), "20000");
  p["vram_staging_bytes"] = "16777216";
  vrig<K, vbuf> r(p);
  constexpr std::size_t small = (1u << 20) + 1, count = 40, big = 20u << 20;
  const std::size_t total = count * small + big;
  const auto data = pattern(total, 9);
  vbuf src(total), dst(total);
  auto [wp, w, rd] = r.write_many("fv-many/", count, small, big, data, src, dst);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    std::memset(dst.data(), 0, total);
    REQUIRE(run(rd, 120s) == nixl::status::success);
    CHECK(dst.same(0, data.data() + count * small, big));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i)
      bad += !dst.same(big + i * small, data.data() + (count - 1 - i) * small, small);
    CHECK(bad == 0);
  }
  // Ranged READs into a sub-range: one GET, and 18 MiB (GETs of part_size) at odd offsets.
  struct cut {
    std::size_t obj_index, obj_off, len, mem_off;
  };
  for (const cut c : {cut{3, 12345, 100000, 4097}, cut{count, (1u << 20) + 3, 18u << 20, 5}}) {
    INFO("object offset " << c.obj_off << ", " << c.len << " bytes to VRAM offset " << c.mem_off);
    vbuf part(c.len + c.mem_off + 1000);
    r.vram(part);
    auto pr =
        r.vrequest(nixl::xfer_op::read, part, {{c.mem_off, wp[c.obj_index].dev, c.obj_off, c.len}});
    REQUIRE(run(pr, 120s) == nixl::status::success);
    const std::byte* obj =
        data.data() + (c.obj_index == count ? count * small : c.obj_index * small);
    CHECK(part.same(c.mem_off, obj + c.obj_off, c.len));
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < part.n; ++i)
      if (i < c.mem_off || i >= c.mem_off + c.len) nonzero += part.data()[i] != std::byte{0};
    CHECK(nonzero == 0);
  }
}

template <class K>
void failures() {
  OBJ_FAKE_START(K, srv);
  auto p = K::params(srv.endpoint(), "20000");
  p["vram_staging_bytes"] = "16777216";
  p["request_timeout_ms"] = "1500";
  vrig<K, vbuf> r(p);
  const auto devs = r.objects({"fv-err", "fv-big-err"});
  const auto data = pattern(8192, 3);
  vbuf g(1u << 20);
  g.put(data);
  r.vram(g);
  auto w = r.vrequest(nixl::xfer_op::write, g, {{0, devs[0], 0, 8192}});
  auto rd = r.vrequest(nixl::xfer_op::read, g, {{8192, devs[0], 0, 8192}});

  // A copy that fails to start (WRITE) and one that fails while it runs (READ).
  fake().fail_next(1);
  CHECK(run(w) == nixl::status::backend);
  CHECK(contains(r.message(w), "cuMemcpyDtoHAsync"));
  CHECK(contains(r.message(w), "CUDA_ERROR_LAUNCH_FAILED"));
  REQUIRE(run(w) == nixl::status::success);
  fake().fail_next(2);
  CHECK(run(rd) == nixl::status::backend);
  CHECK(contains(r.message(rd), "cuMemcpyHtoDAsync"));
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(g.same(8192, data.data(), 8192));

  // A copy that never ends: the request fails within its bound, the backend keeps working.
  fake().fail_next(3);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(run(w, 30s) == nixl::status::backend);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  CHECK(contains(r.message(w), "did not end within"));
  fake().fail_next(0);
  REQUIRE(run(w) == nixl::status::success);
  // The chunks of the copies that failed while running or never ended stay out of the pool: a
  // 16 MiB body cannot fit any more, and says so.
  vbuf big(16u << 20);
  r.vram(big);
  auto wb = r.vrequest(nixl::xfer_op::write, big, {{0, devs[1], 0, big.n}});
  CHECK(run(wb) == nixl::status::backend);
  CHECK(contains(r.message(wb), "no room"));
  REQUIRE(run(rd) == nixl::status::success);

  // Host memory is not VRAM; a pool smaller than one body is refused.
  std::vector<std::byte> host(4096);
  try {
    r.ag.register_memory(nixl::reg_list<nixl::vram_t>{{{addr(host), host.size(), 0}, ""}});
    FAIL("host memory registered as VRAM");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == nixl::status::invalid_param);
    CHECK(contains(e.what(), "not memory the CUDA driver knows"));
  }
  auto small_pool = K::params(srv.endpoint(), "20000");
  small_pool["vram_staging_bytes"] = std::to_string(8u << 20);
  vrig<K, vbuf> r2(small_pool);
  try {
    r2.vram(g);
    FAIL("a pool smaller than multipart_threshold was accepted");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == nixl::status::invalid_param);
    CHECK(contains(e.what(), "vram_staging_bytes"));
  }
}

}  // namespace

TEST_CASE("obj fake cuda: VRAM round trips through the pool", "[fakecuda][s3]") {
  round_trips<s3_kind>();
}
TEST_CASE("azure fake cuda: VRAM round trips through the pool", "[fakecuda][azure]") {
  round_trips<az_kind>();
}
TEST_CASE("obj fake cuda: many descriptors and ranged READs through a small pool",
          "[fakecuda][s3]") {
  many_and_ranges<s3_kind>();
}
TEST_CASE("azure fake cuda: many descriptors and ranged READs through a small pool",
          "[fakecuda][azure]") {
  many_and_ranges<az_kind>();
}
TEST_CASE("obj fake cuda: CUDA failures, a copy that never ends, bad registrations",
          "[fakecuda][s3]") {
  failures<s3_kind>();
}
TEST_CASE("azure fake cuda: CUDA failures, a copy that never ends, bad registrations",
          "[fakecuda][azure]") {
  failures<az_kind>();
}
