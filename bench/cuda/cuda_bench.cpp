// nixl_cuda_bench: the CUDA backend against the CUDA runtime's copies, on the same buffers.
//
// 1. VRAM -> VRAM across two GPUs (GPU 0 writes into GPU 1, agents A and B of one process) at
//    64 KiB, 1 MiB, 16 MiB and 256 MiB: one request (post, then status() until done) against
//    cudaMemcpyPeerAsync + event, same host loop.
// 2. 64 x 4 KiB blocks per request, across GPUs and on one GPU: batch kernel (default), copy
//    engines only (kernel_max_bytes=0), and one cudaMemcpyPeerAsync per block; latency of one
//    request and throughput with 16 requests in flight.
// 3. The kernel/copy-engine crossover: descriptor size x count, kernel against copy engines.
//
// Times are medians over repetitions after warm-up. Usage: nixl_cuda_bench [--quick]

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/cuda.hpp>

#include "bench_common.hpp"

namespace {

using agent = nixl::agent<nixl::cuda::backend>;
using clk = std::chrono::steady_clock;
using nixl::mem_kind;

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median_us(int reps, const std::function<void()>& once) {
  for (int i = 0; i < std::max(3, reps / 10); ++i) once();
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    const auto a = clk::now();
    once();
    t.push_back(std::chrono::duration<double, std::micro>(clk::now() - a).count());
  }
  return nixl_bench::median(t);
}

template <class R>
void run(R& req) {
  auto s = req.post();
  while (s == nixl::status::in_progress) s = req.status();
  if (s != nixl::status::success) {
    std::fprintf(stderr, "transfer failed: %s\n", std::string(nixl::to_string(s)).c_str());
    std::exit(1);
  }
}

struct gpu_mem {
  void* p = nullptr;
  int dev = 0;
  gpu_mem(std::size_t n, int d) : dev(d) {
    must(cudaSetDevice(d), "cudaSetDevice");
    must(cudaMalloc(&p, n), "cudaMalloc");
    must(cudaMemset(p, 0x5a, n), "cudaMemset");
  }
  ~gpu_mem() {
    cudaSetDevice(dev);
    cudaFree(p);
  }
  std::uintptr_t at(std::size_t o = 0) const { return reinterpret_cast<std::uintptr_t>(p) + o; }
};

nixl::xfer_dlist blocks(mem_kind k, std::uintptr_t base, std::size_t count, std::size_t len,
                        std::size_t stride, int dev) {
  return nixl::strided_dlist(k, {{base, len, static_cast<std::uint64_t>(dev), stride, count}})
      .expand();
}

int reps_for(std::size_t bytes, bool quick) {
  int r = bytes >= (64u << 20) ? 20 : bytes >= (4u << 20) ? 60 : 300;
  return quick ? std::max(5, r / 5) : r;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int ndev = nixl::cuda::backend::device_count();
  if (ndev < 1) {
    std::printf("SKIPPED: no GPU (%s)\n",
                std::string(nixl::cuda::backend::no_device_reason()).c_str());
    return 0;
  }
  const int d1 = ndev > 1 ? 1 : 0;
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaDeviceProp p0{};
  cudaGetDeviceProperties(&p0, 0);
  int can = 0, rank = -1;
  if (ndev > 1) {
    cudaDeviceCanAccessPeer(&can, 0, 1);
    cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, 0, 1);
  }
  std::printf(
      "# nixl_cuda_bench: %d GPU(s), GPU0 %s, driver %d, runtime %d, peer 0->1 %s (rank %d)\n",
      ndev, p0.name, drv, rt, can ? "yes" : "no", rank);
  if (ndev < 2) std::printf("# only one GPU: 'across GPUs' rows run on GPU 0\n");

  const std::size_t cap = 256u << 20;
  gpu_mem s0(cap, 0), t1(cap, d1), t0(cap, 0);

  agent B("B");
  B.create_backend("CUDA");
  B.register_memory(
      nixl::reg_dlist(mem_kind::vram, {nixl::reg_desc{{t1.at(), cap, (std::uint64_t)d1}, ""}}));
  B.register_memory(nixl::reg_dlist(mem_kind::vram, {nixl::reg_desc{{t0.at(), cap, 0}, ""}}));
  const std::string md = B.local_metadata();

  auto make = [&](const char* name, nixl::params prm) {
    auto a = std::make_unique<agent>(name);
    a->create_backend("CUDA", prm);
    a->register_memory(nixl::reg_dlist(mem_kind::vram, {nixl::reg_desc{{s0.at(), cap, 0}, ""}}));
    a->load_remote_metadata(md);
    return a;
  };
  auto A = make("A", {});
  auto Ace = make("A_ce", {{"kernel_max_bytes", "0"}});
  auto Ak =
      make("A_kernel", {{"kernel_max_bytes", std::to_string(cap)}, {"kernel_min_count", "1"}});

  cudaStream_t st0 = nullptr;
  cudaEvent_t ev = nullptr;
  must(cudaSetDevice(0), "cudaSetDevice");
  must(cudaStreamCreateWithFlags(&st0, cudaStreamNonBlocking), "cudaStreamCreate");
  must(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  auto peer_copies = [&](std::size_t count, std::size_t len, std::size_t stride, int dst_dev,
                         const gpu_mem& dst) {
    for (std::size_t i = 0; i < count; ++i)
      must(cudaMemcpyPeerAsync(reinterpret_cast<void*>(dst.at(i * stride)), dst_dev,
                               reinterpret_cast<void*>(s0.at(i * stride)), 0, len, st0),
           "cudaMemcpyPeerAsync");
    must(cudaEventRecord(ev, st0), "cudaEventRecord");
    cudaError_t e;
    while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
    }
    must(e, "cudaEventQuery");
  };

  // 1. large copies across GPUs
  std::printf("\n## VRAM -> VRAM, GPU 0 -> GPU %d, one descriptor per request\n", d1);
  std::printf("%-10s %14s %14s %14s %10s %16s\n", "size", "nixl us", "nixl GB/s", "peer GB/s",
              "ratio", "kernel-only GB/s");
  for (std::size_t n : {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20,
                        std::size_t{256} << 20}) {
    const int reps = reps_for(n, quick);
    auto req = A->create_request(nixl::xfer_op::write, blocks(mem_kind::vram, s0.at(), 1, n, n, 0),
                                 blocks(mem_kind::vram, t1.at(), 1, n, n, d1), "B");
    auto reqk =
        Ak->create_request(nixl::xfer_op::write, blocks(mem_kind::vram, s0.at(), 1, n, n, 0),
                           blocks(mem_kind::vram, t1.at(), 1, n, n, d1), "B");
    const double tn = median_us(reps, [&] { run(req); });
    const double tp = median_us(reps, [&] { peer_copies(1, n, n, d1, t1); });
    const double tk = median_us(reps, [&] { run(reqk); });
    // second nixl pass to show the spread between identical runs
    const double tn2 = median_us(reps, [&] { run(req); });
    const double gb = [&](double us) { return n / us / 1e3; }(std::min(tn, tn2));
    std::printf("%-10s %14.1f %14.1f %14.1f %10.3f %16.1f\n",
                n >= (1u << 20) ? (std::to_string(n >> 20) + " MiB").c_str()
                                : (std::to_string(n >> 10) + " KiB").c_str(),
                std::min(tn, tn2), gb, n / tp / 1e3, tp / std::min(tn, tn2), n / tk / 1e3);
    std::printf("#   nixl runs: %.1f us and %.1f us (spread %.1f%%)\n", tn, tn2,
                100.0 * std::abs(tn - tn2) / std::min(tn, tn2));
  }

  // READ: GPU 0's agent pulls GPU 1's buffer (the backend pushes from GPU 1) against
  // cudaMemcpyPeerAsync on a stream of GPU 0
  if (ndev > 1) {
    std::printf("\n## READ into GPU 0 from GPU 1, one descriptor per request\n");
    std::printf("%-10s %14s %14s %14s %10s\n", "size", "nixl us", "nixl GB/s", "peer GB/s",
                "ratio");
    for (std::size_t n : {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20,
                          std::size_t{256} << 20}) {
      const int reps = reps_for(n, quick);
      auto req = A->create_request(nixl::xfer_op::read, blocks(mem_kind::vram, s0.at(), 1, n, n, 0),
                                   blocks(mem_kind::vram, t1.at(), 1, n, n, d1), "B");
      const double tn = median_us(reps, [&] { run(req); });
      const double tp = median_us(reps, [&] {
        must(cudaMemcpyPeerAsync(reinterpret_cast<void*>(s0.at()), 0,
                                 reinterpret_cast<void*>(t1.at()), 1, n, st0),
             "cudaMemcpyPeerAsync");
        must(cudaEventRecord(ev, st0), "cudaEventRecord");
        cudaError_t e;
        while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
        }
        must(e, "cudaEventQuery");
      });
      std::printf("%-10s %14.1f %14.1f %14.1f %10.3f\n",
                  n >= (1u << 20) ? (std::to_string(n >> 20) + " MiB").c_str()
                                  : (std::to_string(n >> 10) + " KiB").c_str(),
                  tn, n / tn / 1e3, n / tp / 1e3, tp / tn);
    }
  }

  // 2. 64 x 4 KiB
  std::printf("\n## 64 x 4 KiB blocks per request (blocks 64 KiB apart)\n");
  std::printf("%-12s %-28s %12s %12s %16s\n", "path", "method", "us/request", "us/block",
              "us/block (16 in flight)");
  const std::size_t nb = 64, bl = 4096, stride = 65536;
  for (int pass = 0; pass < 2; ++pass) {
    const int dd = pass == 0 ? d1 : 0;
    const gpu_mem& dst = pass == 0 ? t1 : t0;
    const char* path = pass == 0 ? "GPU0->GPU1" : "GPU0->GPU0";
    if (pass == 0 && ndev < 2) continue;
    for (int m = 0; m < 2; ++m) {
      auto& a = m == 0 ? *A : *Ace;
      auto req =
          a.create_request(nixl::xfer_op::write, blocks(mem_kind::vram, s0.at(), nb, bl, stride, 0),
                           blocks(mem_kind::vram, dst.at(), nb, bl, stride, dd), "B");
      const double t = median_us(quick ? 200 : 2000, [&] { run(req); });
      // 16 requests in flight
      std::vector<decltype(req)> many;
      for (int i = 0; i < 16; ++i)
        many.push_back(a.create_request(
            nixl::xfer_op::write, blocks(mem_kind::vram, s0.at(i * 4096), nb, bl, stride, 0),
            blocks(mem_kind::vram, dst.at(i * 4096), nb, bl, stride, dd), "B"));
      const double tm = median_us(quick ? 50 : 300, [&] {
        for (auto& r : many) (void)r.post();
        for (auto& r : many) {
          auto s = r.status();
          while (s == nixl::status::in_progress) s = r.status();
        }
      });
      std::printf("%-12s %-28s %12.2f %12.3f %16.3f\n", path,
                  m == 0 ? "nixl (batch kernel)" : "nixl (copy engines)", t, t / nb,
                  tm / (16 * nb));
    }
    const double tp = median_us(quick ? 200 : 1000, [&] { peer_copies(nb, bl, stride, dd, dst); });
    std::printf("%-12s %-28s %12.2f %12.3f %16s\n", path, "cudaMemcpyPeerAsync x 64", tp, tp / nb,
                "-");
  }

  // 3. crossover
  std::printf("\n## kernel vs copy engines, GPU 0 -> GPU %d: us per request (kernel / engines)\n",
              d1);
  std::printf("%-10s", "desc size");
  const std::size_t counts[] = {1, 2, 4, 16, 64, 256};
  for (auto c : counts) std::printf(" %17zu", c);
  std::printf("\n");
  for (std::size_t len :
       {std::size_t{1} << 10, std::size_t{4} << 10, std::size_t{16} << 10, std::size_t{64} << 10,
        std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
    std::printf("%-10s", len >= (1u << 20) ? (std::to_string(len >> 20) + " MiB").c_str()
                                           : (std::to_string(len >> 10) + " KiB").c_str());
    for (auto c : counts) {
      if (2 * c * len > cap) {
        std::printf(" %17s", "-");
        continue;
      }
      const int reps = reps_for(c * len, true);
      auto rk = Ak->create_request(nixl::xfer_op::write,
                                   blocks(mem_kind::vram, s0.at(), c, len, 2 * len, 0),
                                   blocks(mem_kind::vram, t1.at(), c, len, 2 * len, d1), "B",
                                   nixl::xfer_options{.skip_merge = true});
      auto rc = Ace->create_request(nixl::xfer_op::write,
                                    blocks(mem_kind::vram, s0.at(), c, len, 2 * len, 0),
                                    blocks(mem_kind::vram, t1.at(), c, len, 2 * len, d1), "B",
                                    nixl::xfer_options{.skip_merge = true});
      const double tk = median_us(reps, [&] { run(rk); });
      const double tc = median_us(reps, [&] { run(rc); });
      std::printf(" %8.1f/%-8.1f", tk, tc);
    }
    std::printf("\n");
  }
  std::printf("# descriptors of the crossover table are 'size' apart, so none merge\n");
  // 4. copy engines in parallel
  // One copy split over k streams of the source GPU (push) or of the destination GPU (pull).
  if (ndev > 1) {
    std::printf("\n## one copy split over k streams, GPU 0 -> GPU 1, GB/s (runtime calls only)\n");
    std::printf("%-10s %10s %10s %10s %10s %10s %10s\n", "size", "push k=1", "push k=2", "push k=4",
                "pull k=1", "pull k=2", "pull k=4");
    cudaStream_t ss[2][4];
    cudaEvent_t ee[2][4];
    for (int dv = 0; dv < 2; ++dv) {
      must(cudaSetDevice(dv), "cudaSetDevice");
      for (int i = 0; i < 4; ++i) {
        must(cudaStreamCreateWithFlags(&ss[dv][i], cudaStreamNonBlocking), "cudaStreamCreate");
        must(cudaEventCreateWithFlags(&ee[dv][i], cudaEventDisableTiming), "cudaEventCreate");
      }
    }
    for (std::size_t n : {std::size_t{16} << 20, std::size_t{64} << 20, std::size_t{256} << 20}) {
      std::printf("%-10s", (std::to_string(n >> 20) + " MiB").c_str());
      for (int dv = 0; dv < 2; ++dv)
        for (int k : {1, 2, 4}) {
          const double t = median_us(reps_for(n, quick), [&] {
            const std::size_t part = n / k;
            for (int i = 0; i < k; ++i) {
              must(
                  cudaMemcpyPeerAsync(reinterpret_cast<void*>(t1.at(i * part)), 1,
                                      reinterpret_cast<void*>(s0.at(i * part)), 0, part, ss[dv][i]),
                  "cudaMemcpyPeerAsync");
              must(cudaEventRecord(ee[dv][i], ss[dv][i]), "cudaEventRecord");
            }
            for (int i = 0; i < k; ++i) {
              cudaError_t e;
              while ((e = cudaEventQuery(ee[dv][i])) == cudaErrorNotReady) {
              }
              must(e, "cudaEventQuery");
            }
          });
          std::printf(" %10.1f", n / t / 1e3);
        }
      std::printf("\n");
    }
  }

  cudaEventDestroy(ev);
  cudaStreamDestroy(st0);
  return 0;
}
