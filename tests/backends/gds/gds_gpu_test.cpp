// GDS and GDS_MT on a GPU with NVIDIA's libcufile: VRAM and DRAM <-> file, 1 and 1000
// descriptors, 4 KiB to 256 MiB, O_DIRECT and buffered, data checked; a closed descriptor, a
// READ past the end of a file and a file on tmpfs each give a clear error. Every case skips
// with the reason where there is no GPU or no libcufile. Files go to $NIXL_GDS_TEST_DIR (default
// the temporary folder; it must be on ext4 or xfs).

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>

#include "gds_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/gpu.hpp"

using namespace gds_test;
using gds_b = nixl::gds::backend;
using mt_b = nixl::gds_mt::backend;

namespace {

using nixl::test::no_gpu;

/// The backend over the real libcufile, or the reason it cannot start ("libcufile not found").
template <class B>
std::optional<B> start(std::string& why, nixl::params p = {}) {
  try {
    return std::optional<B>(std::in_place, B::config::from_params(p),
                            nixl::backend_context{"gds-gpu-" + std::string(B::name)});
  } catch (const nixl::error& e) {
    why = e.what();
    if (why.find("libcufile not found") == std::string::npos) throw;
    return std::nullopt;
  }
}

fs::path test_dir() {
  const char* d = std::getenv("NIXL_GDS_TEST_DIR");
  return d != nullptr && *d != '\0' ? fs::path(d) : fs::temp_directory_path();
}

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(e));
}

/// VRAM or DRAM of `n` bytes with an upload/download of host bytes.
struct memory {
  nixl::mem_kind kind;
  std::size_t n;
  void* p = nullptr;
  memory(nixl::mem_kind k, std::size_t bytes) : kind(k), n(bytes) {
    if (k == nixl::mem_kind::vram) {
      must(cudaSetDevice(0), "cudaSetDevice");
      must(cudaMalloc(&p, n), "cudaMalloc");
      must(cudaMemset(p, 0, n), "cudaMemset");
    } else {
      p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
      REQUIRE(p != nullptr);
      std::memset(p, 0, n);
    }
  }
  ~memory() {
    if (kind == nixl::mem_kind::vram)
      cudaFree(p);
    else
      std::free(p);
  }
  memory(const memory&) = delete;
  std::uintptr_t addr() const { return reinterpret_cast<std::uintptr_t>(p); }
  void put(const std::vector<std::byte>& v) {
    if (kind == nixl::mem_kind::vram) {
      must(cudaMemcpy(p, v.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
      must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    } else {
      std::memcpy(p, v.data(), n);
    }
  }
  std::vector<std::byte> get() const {
    std::vector<std::byte> v(n);
    if (kind == nixl::mem_kind::vram)
      must(cudaMemcpy(v.data(), p, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    else
      std::memcpy(v.data(), p, n);
    return v;
  }
};

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (std::size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, n - i));
  }
  return v;
}

#define GDS_GPU_START(B, b, ...)              \
  if (auto why = no_gpu()) NIXL_SKIP(*why);   \
  std::string gds_why_;                       \
  auto b = start<B>(gds_why_, ##__VA_ARGS__); \
  if (!b) NIXL_SKIP(gds_why_)

}  // namespace

TEMPLATE_TEST_CASE("gds gpu: VRAM and DRAM <-> file, data checked", "[gds][gpu]", gds_b, mt_b) {
  GDS_GPU_START(TestType, b, nixl::params{{"thread_count", "8"}});
  struct shape {
    std::size_t count, len;
  };
  const auto kind = GENERATE(nixl::mem_kind::vram, nixl::mem_kind::dram);
  const bool direct = GENERATE(false, true);
  const auto s = GENERATE(shape{1, 4096}, shape{1, 1u << 20}, shape{1, (16u << 20) + 4096},
                          shape{1, 256u << 20}, shape{1000, 4096}, shape{1000, 64u << 10});
  DYNAMIC_SECTION(nixl::to_string(kind)
                  << (direct ? " O_DIRECT " : " buffered ") << s.count << " x " << s.len) {
    scratch tmp(test_dir());
    const int flags = O_RDWR | O_CREAT | (direct ? O_DIRECT : 0);
    fd_guard fd(::open((tmp / "data").c_str(), flags, 0600));
    const std::size_t total = s.count * s.len;
    memory src(kind, total), dst(kind, total);
    const auto bytes = pattern(total, static_cast<std::uint32_t>(s.count * 7 + s.len));
    src.put(bytes);
    const auto pieces = scattered(s.count, s.len);
    {
      rig<TestType> r(*b, kind, src.addr(), total, 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::write, pieces) == nixl::status::success);
    }
    {
      rig<TestType> r(*b, kind, dst.addr(), total, 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::read, pieces) == nixl::status::success);
    }
    const auto back = dst.get();
    REQUIRE(std::memcmp(back.data(), bytes.data(), total) == 0);
    // And what is in the file is what was written, read without cuFile.
    if (!direct) {
      std::vector<std::byte> one(s.len);
      const auto& pc = pieces.back();
      REQUIRE(::pread(fd.fd, one.data(), s.len, static_cast<off_t>(pc.file_off)) ==
              static_cast<ssize_t>(s.len));
      CHECK(std::memcmp(one.data(), bytes.data() + pc.mem_off, s.len) == 0);
    }
  }
}

TEST_CASE("gds gpu: DRAM with dram_batch, O_DIRECT and buffered files, data checked",
          "[gds][gpu]") {
  // In compatibility mode (these machines) dram_batch leaves host memory on the threads:
  // libcufile 1.15 moved the base's bytes for every entry named as base + offset
  // (bench/cuda/cufile_batch_probe), failed entries to buffered files, and with entries named by
  // their own address aborted the process ("free(): invalid pointer") at 1000 x 64 KiB to an
  // O_DIRECT file. With nvidia-fs the entries go through the batch API, named by their own address.
  GDS_GPU_START(gds_b, b, nixl::params{{"dram_batch", "true"}});
  const bool direct = GENERATE(true, false);
  struct shape {
    std::size_t count, len;
  };
  const auto s = GENERATE(shape{1, 4096}, shape{16, 4096}, shape{1, (16u << 20) + 4096},
                          shape{1000, 64u << 10});
  DYNAMIC_SECTION((direct ? "O_DIRECT, " : "buffered, ") << s.count << " x " << s.len) {
    scratch tmp(test_dir());
    fd_guard fd(::open((tmp / "data").c_str(), O_RDWR | O_CREAT | (direct ? O_DIRECT : 0), 0600));
    const std::size_t total = s.count * s.len;
    memory src(nixl::mem_kind::dram, total), dst(nixl::mem_kind::dram, total);
    const auto bytes = pattern(total, static_cast<std::uint32_t>(s.count * 5 + s.len));
    src.put(bytes);
    const auto pieces = scattered(s.count, s.len);
    {
      rig<gds_b> r(*b, nixl::mem_kind::dram, src.addr(), total, 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::write, pieces) == nixl::status::success);
    }
    {
      rig<gds_b> r(*b, nixl::mem_kind::dram, dst.addr(), total, 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::read, pieces) == nixl::status::success);
    }
    REQUIRE(std::memcmp(dst.get().data(), bytes.data(), total) == 0);
  }
}

TEMPLATE_TEST_CASE("gds gpu: errors are clear", "[gds][gpu]", gds_b, mt_b) {
  GDS_GPU_START(TestType, b);
  scratch tmp(test_dir());
  memory mem(nixl::mem_kind::vram, 1u << 20);
  SECTION("a closed descriptor") {
    const int fd = ::open((tmp / "closed").c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    ::close(fd);
    try {
      (void)b->register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, ""});
      FAIL("no throw");
    } catch (const nixl::error& e) {
      CHECK(e.status_code() == nixl::status::invalid_param);
      CHECK(std::string(e.what()).find("not an open file descriptor") != std::string::npos);
    }
  }
  SECTION("a READ past the end of the file") {
    fd_guard fd(::open((tmp / "short").c_str(), O_RDWR | O_CREAT, 0600));
    std::vector<std::byte> four(4096, std::byte{1});
    REQUIRE(::pwrite(fd.fd, four.data(), four.size(), 0) == 4096);
    rig<TestType> r(*b, nixl::mem_kind::vram, mem.addr(), mem.n, 0, fd.fd);
    CHECK(r.run(nixl::xfer_op::read, {{0, 8192, 4096}}) == nixl::status::backend);
    CHECK(r.run(nixl::xfer_op::read, {{0, 0, 65536}}) == nixl::status::backend);
    CHECK(r.run(nixl::xfer_op::read, {{0, 0, 4096}}) == nixl::status::success);
  }
  SECTION("a file on tmpfs") {
    struct statfs st {};
    if (::statfs("/dev/shm", &st) != 0 || static_cast<unsigned long>(st.f_type) != TMPFS_MAGIC)
      NIXL_SKIP("no tmpfs at /dev/shm");
    scratch shm("/dev/shm");
    fd_guard fd(::open((shm / "t").c_str(), O_RDWR | O_CREAT, 0600));
    try {
      (void)b->register_region(nixl::mem_kind::file,
                               {{0, 0, static_cast<std::uint64_t>(fd.fd)}, ""});
      FAIL("cuFile took a file on tmpfs");
    } catch (const nixl::error& e) {
      CHECK(std::string(e.what()).find("tmpfs") != std::string::npos);
    }
  }
}
