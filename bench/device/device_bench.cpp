// nixl_device_bench: GPU-initiated transfers through memory views on GPU 0, in one process
// with two agents of the CUDA backend (A puts into B's VRAM through A's views), against the
// same bytes moved without NIXL in the same run:
//
// 1. One kernel putting N bytes (4 KiB to 64 MiB) through the views at BLOCK level, in one
//    block and in a grid of blocks each putting its slice, against a plain 16-byte copy kernel
//    of the same launch shape and against cudaMemcpyAsync device-to-device (GB/s; goal: put >=
//    0.9 x the copy kernel from 64 KiB on).
// 2. 64 puts of 4 KiB in one kernel (one warp per put) against the CUDA backend's batched copy
//    of the same 64 blocks (one request: post, then status() until done): microseconds per
//    4 KiB (goal: <= 0.2 us per put).
//
// Each point repeats until min_ms (200 ms; --quick: 20 ms) of time has passed; kernels are timed
// with cudaEvents around back-to-back launches. A put and its copy kernel are measured in turns
// (five each, the median of each), so that a drift of the GPU's clocks moves both alike. Usage:
// nixl_device_bench [--quick]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/cuda.hpp>

#include "bench_common.hpp"
#include "kernels.hpp"

namespace {

namespace db = device_bench;
using agent = nixl::agent<nixl::cuda::backend>;
using clk = std::chrono::steady_clock;

std::string size_name(std::size_t n) {
  return n >= (1u << 20) ? std::to_string(n >> 20) + " MiB" : std::to_string(n >> 10) + " KiB";
}

/// Microseconds per request of `req` (post, then status() until done), back to back for min_ms.
template <class R>
double request_us(R& req) {
  auto once = [&] {
    auto s = req.post();
    while (s == nixl::status::in_progress) s = req.status();
    if (s != nixl::status::success) {
      std::fprintf(stderr, "nixl_device_bench: the CUDA backend's request failed: %s\n",
                   std::string(nixl::to_string(s)).c_str());
      std::exit(2);
    }
  };
  once();
  long n = 0;
  const auto a = clk::now();
  const auto end = a + std::chrono::duration<double, std::milli>(db::min_ms());
  while (clk::now() < end || n < 10) {
    once();
    ++n;
  }
  return std::chrono::duration<double, std::micro>(clk::now() - a).count() / static_cast<double>(n);
}

/// GB/s of the put and of the copy kernel of the same launch shape, measured alternately
/// (`rounds` times each, min_ms / rounds a time) so that the GPU's clock drifting during the run
/// moves both alike; the median of each.
std::pair<double, double> put_and_copy(void* l, void* r, const void* src, void* ref, std::size_t n,
                                       int blocks) {
  constexpr int rounds = 5;
  const double whole = db::min_ms();
  db::set_min_ms(whole / rounds);
  std::vector<double> put, copy;
  for (int i = 0; i < rounds; ++i) {
    put.push_back(static_cast<double>(n) / db::put_us(l, r, n, blocks) / 1e3);
    copy.push_back(static_cast<double>(n) / db::copy_us(src, ref, n, blocks) / 1e3);
  }
  db::set_min_ms(whole);
  return {nixl_bench::median(put), nixl_bench::median(copy)};
}

nixl::xfer_dlist blocks_of(std::uintptr_t base, std::size_t count, std::size_t len) {
  return nixl::strided_dlist(nixl::mem_kind::vram, {{base, len, 0, len, count}}).expand();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--quick") == 0) db::set_min_ms(20);
  if (const std::string why = db::no_gpu(); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 0;
  }
  const int sms = db::sm_count();
  std::printf("# nixl_device_bench: GPU 0 %s, %d SMs, %.0f ms per point\n", db::gpu_name().c_str(),
              sms, db::min_ms());

  const std::size_t cap = 64u << 20;
  void* src = db::vram(cap);
  void* dst = db::vram(cap);
  void* ref = db::vram(cap);
  const auto sa = reinterpret_cast<std::uintptr_t>(src);
  const auto da = reinterpret_cast<std::uintptr_t>(dst);

  int rc = 0;
  try {
    agent A("A"), B("B");
    A.create_backend<nixl::cuda::backend>();
    B.create_backend<nixl::cuda::backend>();
    A.register_memory(nixl::reg_list<nixl::vram_t>{{{sa, cap, 0}, ""}});
    B.register_memory(nixl::reg_list<nixl::vram_t>{{{da, cap, 0}, ""}});
    A.load_remote_metadata(B.local_metadata());
    void* l = A.prepare_view(nixl::xfer_list<nixl::vram_t>{{sa, cap, 0}});
    const std::vector<nixl::remote_entry> rl{{"B", {da, cap, 0}}};
    void* r = A.prepare_view(nixl::vram, rl);

    // 1. bulk puts
    const int grid_max = 4 * sms;
    std::printf(
        "\n## one kernel putting N bytes through views (BLOCK level, 512 threads a block)\n");
    std::printf(
        "# grid: min(N / 16 KiB, %d) blocks, each putting its slice; the faster shape is "
        "shown, the other in the last columns\n",
        grid_max);
    std::printf("%-8s %-6s %7s %10s %10s %7s %12s | %12s %12s\n", "size", "shape", "blocks",
                "put GB/s", "copy GB/s", "ratio", "memcpy GB/s", "other put", "other copy");
    for (std::size_t n : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20,
                          std::size_t{16} << 20, std::size_t{64} << 20}) {
      const int grid = static_cast<int>(std::max<std::size_t>(
          1, std::min<std::size_t>(n / (16u << 10), static_cast<std::size_t>(grid_max))));
      db::fill(src, dst, n, static_cast<unsigned>(n >> 12));
      db::put_once(l, r, n, grid);
      if (!db::equal(src, dst, n)) {
        std::fprintf(stderr, "nixl_device_bench: %s put through views: the data differs\n",
                     size_name(n).c_str());
        rc = 1;
      }
      const auto gb = [&](double us) { return static_cast<double>(n) / us / 1e3; };
      const auto [p1, c1] = put_and_copy(l, r, src, ref, n, 1);
      const auto [pg, cg] = put_and_copy(l, r, src, ref, n, grid);
      const double mc = gb(db::memcpy_us(src, ref, n));
      const bool g = pg >= p1;
      std::printf("%-8s %-6s %7d %10.1f %10.1f %7.3f %12.1f | %12.1f %12.1f\n",
                  size_name(n).c_str(), g ? "grid" : "block", g ? grid : 1, g ? pg : p1,
                  g ? cg : c1, (g ? pg : p1) / (g ? cg : c1), mc, g ? p1 : pg, g ? c1 : cg);
    }
    std::printf("# goal: ratio (put / copy kernel, same shape) >= 0.9 from 64 KiB\n");

    // 2. many small puts
    constexpr int count = 64;
    constexpr std::size_t len = 4096;
    db::fill(src, dst, count * len, 7);
    auto req = A.create_request(nixl::xfer_op::write, blocks_of(sa, count, len),
                                blocks_of(da, count, len), "B");
    const double k_ev = db::small_puts_us(l, r, count, len);
    if (!db::equal(src, dst, count * len)) {
      std::fprintf(stderr, "nixl_device_bench: 64 x 4 KiB puts: the data differs\n");
      rc = 1;
    }
    const double k_host = db::small_puts_host_us(l, r, count, len);
    const double q = request_us(req);
    std::printf(
        "\n## %d x 4 KiB in one kernel (one warp per put) vs the CUDA backend's batched "
        "copy (one request)\n",
        count);
    std::printf("%-52s %12s %12s\n", "path", "us / batch", "us / 4 KiB");
    std::printf("%-52s %12.2f %12.3f\n", "views kernel (cudaEvents, back-to-back launches)", k_ev,
                k_ev / count);
    std::printf("%-52s %12.2f %12.3f\n", "views kernel (host clock: launch + synchronize)", k_host,
                k_host / count);
    std::printf("%-52s %12.2f %12.3f\n", "CUDA backend request (host clock: post + poll)", q,
                q / count);
    std::printf("# goal: <= 0.2 us per 4 KiB put\n");
    A.release_view(l);
    A.release_view(r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nixl_device_bench: %s\n", e.what());
    rc = 2;
  }
  db::vram_free(src);
  db::vram_free(dst);
  db::vram_free(ref);
  return rc;
}
