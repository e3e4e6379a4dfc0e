// OBJ and AZURE_BLOB with VRAM on a GPU, against s3rver and azurite: VRAM -> object -> VRAM of
// 1 B, 4 KiB and 64 MiB (read back into VRAM and into DRAM, data checked) with the default
// staging pool and with one of the smallest size allowed; many descriptors in one request,
// posted twice; ranged READs into a VRAM sub-range (one GET, and GETs in pieces); a READ past
// the end of an object and host memory registered as VRAM give clear errors, and the backend
// works after them. Every case skips with the reason where there is no GPU or no server.

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>

#include "nixl_test/gpu.hpp"
#include "obj_vram_support.hpp"

using namespace obj_test;

namespace {

using nixl::test::no_gpu;

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(e));
}

/// `n` bytes of GPU 0, zeroed.
struct gpu_buf {
  std::size_t n;
  void* p = nullptr;
  explicit gpu_buf(std::size_t bytes) : n(bytes) {
    must(cudaSetDevice(0), "cudaSetDevice");
    must(cudaMalloc(&p, n), "cudaMalloc");
    must(cudaMemset(p, 0, n), "cudaMemset");
    must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  ~gpu_buf() { cudaFree(p); }
  gpu_buf(const gpu_buf&) = delete;
  std::uintptr_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(p) + off;
  }
  void put(const std::vector<std::byte>& v) {
    REQUIRE(v.size() <= n);
    must(cudaMemcpy(p, v.data(), v.size(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    // From pageable memory the copy may still be under way when cudaMemcpy returns; the
    // backend's stream does not wait for the legacy stream.
    must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<std::byte> get() const {
    std::vector<std::byte> v(n);
    must(cudaMemcpy(v.data(), p, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return v;
  }
};

#define OBJ_GPU_START(K, srv)               \
  if (auto why = no_gpu()) NIXL_SKIP(*why); \
  server srv(K::server);                    \
  NIXL_REQUIRE_SERVER(srv)

template <class K>
void round_trips() {
  OBJ_GPU_START(K, srv);
  // The default pool (64 MiB), and one of the largest HTTP body (16 MiB): a 64 MiB object then
  // goes through it in pieces.
  const std::string pool = GENERATE(std::string(), std::string("16777216"));
  auto p = K::params(srv.endpoint());
  if (!pool.empty()) p["vram_staging_bytes"] = pool;
  INFO("vram_staging_bytes " << (pool.empty() ? "default" : pool));
  vrig<K, gpu_buf> r(p);
  const std::vector<std::size_t> sizes = {1, 4096, 64u << 20};
  const auto devs = r.objects({"vram-one", "vram/four kib", "vram-big"});
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("size " << sizes[i]);
    const auto data = pattern(sizes[i], static_cast<std::uint32_t>(i + 11));
    gpu_buf src(sizes[i]), dst(sizes[i]);
    src.put(data);
    r.vram(src);
    r.vram(dst);
    const auto t0 = std::chrono::steady_clock::now();
    auto w = r.vrequest(nixl::xfer_op::write, src, {{0, devs[i], 0, sizes[i]}});
    REQUIRE(run(w) == nixl::status::success);
    const auto t1 = std::chrono::steady_clock::now();
    auto rd = r.vrequest(nixl::xfer_op::read, dst, {{0, devs[i], 0, sizes[i]}});
    REQUIRE(run(rd) == nixl::status::success);
    const auto t2 = std::chrono::steady_clock::now();
    CHECK(dst.get() == data);
    // What the store holds, read into DRAM.
    std::vector<std::byte> host(sizes[i]);
    r.memory(host);
    const auto t3 = std::chrono::steady_clock::now();
    auto rh = r.request(nixl::xfer_op::read, host, {{0, devs[i], 0, sizes[i]}});
    REQUIRE(run(rh) == nixl::status::success);
    const auto t4 = std::chrono::steady_clock::now();
    CHECK(host == data);
    // Times of one run against a local Node server (not a benchmark: the server dominates).
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    std::printf(
        "obj-gpu timing: %s pool %s, %zu B: VRAM write %.1f ms, VRAM read %.1f ms, "
        "DRAM read %.1f ms\n",
        std::string(K::backend::name).c_str(), pool.empty() ? "default" : pool.c_str(), sizes[i],
        ms(t1 - t0), ms(t2 - t1), ms(t4 - t3));
  }
}

template <class K>
void many_descriptors() {
  OBJ_GPU_START(K, srv);
  auto p = K::params(srv.endpoint());
  p["vram_staging_bytes"] = "16777216";  // fewer bytes than the request moves
  vrig<K, gpu_buf> r(p);
  // 48 objects of 1 MiB + 1 B and one of 20 MiB (multipart) from one VRAM buffer.
  constexpr std::size_t small = (1u << 20) + 1, count = 48, big = 20u << 20;
  const std::size_t total = count * small + big;
  const auto data = pattern(total, 5);
  gpu_buf src(total), dst(total);
  auto [w_pieces, w, rd] = r.write_many("vram-many/", count, small, big, data, src, dst);
  for (int round = 0; round < 2; ++round) {  // the same request posted again
    INFO("round " << round);
    must(cudaMemset(dst.p, 0, total), "cudaMemset");
    must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    REQUIRE(run(rd, 120s) == nixl::status::success);
    const auto got = dst.get();
    CHECK(std::memcmp(got.data(), data.data() + count * small, big) == 0);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i)
      bad += std::memcmp(got.data() + big + i * small, data.data() + (count - 1 - i) * small,
                         small) != 0;
    CHECK(bad == 0);
  }
}

template <class K>
void ranged_reads() {
  OBJ_GPU_START(K, srv);
  vrig<K, gpu_buf> r(K::params(srv.endpoint()));
  const auto devs = r.objects({"vram-range-small", "vram-range-big"});
  const auto small = pattern(1u << 20, 21), big = pattern(40u << 20, 22);
  r.memory(small);
  r.memory(big);
  auto w1 = r.request(nixl::xfer_op::write, small, {{0, devs[0], 0, small.size()}});
  REQUIRE(run(w1) == nixl::status::success);
  auto w2 = r.request(nixl::xfer_op::write, big, {{0, devs[1], 0, big.size()}});
  REQUIRE(run(w2, 120s) == nixl::status::success);

  struct cut {
    std::uint64_t dev;
    const std::vector<std::byte>* src;
    std::size_t obj_off, len, mem_off;
  };
  // One GET; and 30 MiB (above the threshold: GETs of part_size) at odd offsets.
  for (const cut c : {cut{devs[0], &small, 12345, 100000, 4097},
                      cut{devs[1], &big, (1u << 20) + 3, 30u << 20, 5}}) {
    INFO("object offset " << c.obj_off << ", " << c.len << " bytes to VRAM offset " << c.mem_off);
    gpu_buf dst(c.len + c.mem_off + 1000);
    r.vram(dst);
    auto rd = r.vrequest(nixl::xfer_op::read, dst, {{c.mem_off, c.dev, c.obj_off, c.len}});
    REQUIRE(run(rd, 120s) == nixl::status::success);
    const auto got = dst.get();
    CHECK(std::memcmp(got.data() + c.mem_off, c.src->data() + c.obj_off, c.len) == 0);
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (i < c.mem_off || i >= c.mem_off + c.len) nonzero += got[i] != std::byte{0};
    CHECK(nonzero == 0);  // nothing written outside the range
  }
}

template <class K>
void errors() {
  OBJ_GPU_START(K, srv);
  vrig<K, gpu_buf> r(K::params(srv.endpoint()));
  const auto devs = r.objects({"vram-err"});
  const auto data = pattern(4096, 31);
  gpu_buf g(8192);
  g.put(data);
  r.vram(g);
  auto w = r.vrequest(nixl::xfer_op::write, g, {{0, devs[0], 0, 4096}});
  REQUIRE(run(w) == nixl::status::success);
  // Past the end of the object.
  auto bad = r.vrequest(nixl::xfer_op::read, g, {{4096, devs[0], 1000, 4096}});
  const auto s = run(bad);
  CHECK(s != nixl::status::success);
  CHECK(s != nixl::status::unknown);
  CHECK_FALSE(r.message(bad).empty());
  // Host memory is not VRAM.
  std::vector<std::byte> host(4096);
  try {
    r.ag.register_memory(nixl::reg_list<nixl::vram_t>{{{addr(host), host.size(), 0}, ""}});
    FAIL("host memory registered as VRAM");
  } catch (const nixl::error& e) {
    INFO(e.what());
    CHECK(e.status_code() == nixl::status::invalid_param);
  }
  // Still works.
  auto rd = r.vrequest(nixl::xfer_op::read, g, {{4096, devs[0], 0, 4096}});
  REQUIRE(run(rd) == nixl::status::success);
  const auto got = g.get();
  CHECK(std::memcmp(got.data() + 4096, data.data(), 4096) == 0);
}

}  // namespace

TEST_CASE("obj gpu: VRAM -> OBJ -> VRAM of 1 B, 4 KiB, 64 MiB", "[gpu][s3]") {
  round_trips<s3_kind>();
}
TEST_CASE("azure gpu: VRAM -> AZURE_BLOB -> VRAM of 1 B, 4 KiB, 64 MiB", "[gpu][azure]") {
  round_trips<az_kind>();
}
TEST_CASE("obj gpu: many descriptors in one request, through a small pool", "[gpu][s3]") {
  many_descriptors<s3_kind>();
}
TEST_CASE("azure gpu: many descriptors in one request, through a small pool", "[gpu][azure]") {
  many_descriptors<az_kind>();
}
TEST_CASE("obj gpu: ranged READs into a VRAM sub-range", "[gpu][s3]") {
  ranged_reads<s3_kind>();
}
TEST_CASE("azure gpu: ranged READs into a VRAM sub-range", "[gpu][azure]") {
  ranged_reads<az_kind>();
}
TEST_CASE("obj gpu: errors with VRAM, and the backend works after them", "[gpu][s3]") {
  errors<s3_kind>();
}
TEST_CASE("azure gpu: errors with VRAM, and the backend works after them", "[gpu][azure]") {
  errors<az_kind>();
}
