// Baselines measured in the same run as the transfers (baselines.hpp).

#include "baselines.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#if defined(NIXL_BENCH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nixl_bench {

/// Copies the blocks the transfers moved, in the same order: with `slots`, iteration k copies
/// blocks (k * batch + j) % slots as the prepared mode does, else the same `batch` blocks.
baseline_result memcpy_baseline(std::uint8_t* src, std::uint8_t* dst, const nb::layout& lay,
                                std::size_t batch, const nb::point& p, bool read,
                                std::size_t slots) {
  if (read) std::swap(src, dst);
  auto once = [&](int k) {
    for (std::size_t j = 0; j < batch; ++j) {
      const std::size_t i = slots ? (static_cast<std::size_t>(k) * batch + j) % slots : j;
      const std::size_t off = lay.offset(0, i);
      std::memcpy(dst + off, src + off, lay.block);
    }
  };
  for (int k = 0; k < p.warmup; ++k) once(k);
  const auto a = nb::clock::now();
  for (int k = p.warmup; k < p.warmup + p.iters; ++k) once(k);
  const double us = nb::us_since(a, nb::clock::now());
  const double bytes = static_cast<double>(lay.block * batch) * p.iters;
  return {bytes / us / 1e3, us / p.iters};
}

baseline_result fio_baseline(const std::string& path, const nb::point& p, bool read, int seconds) {
  // One fio job over the same file and range: `batch` blocks, io_uring, queue depth = batch,
  // looping over the range for a fixed time (fio reports times in whole milliseconds, so a
  // short job would say nothing).
  const std::size_t size = p.block * p.batch;
  const std::string cmd = fmt::format(
      "fio --name=nixl-bench --filename='{}' --rw={} --bs={} --size={} --time_based "
      "--runtime={} --ioengine=io_uring --iodepth={} --invalidate=0 --output-format=json "
      "2>/dev/null",
      path, read ? "read" : "write", p.block, size, seconds, std::min<std::size_t>(p.batch, 256));
  std::FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return {};
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  if (::pclose(f) != 0) {
    fmt::print(stderr, "nixl-bench: fio failed; no file baseline (is fio installed?)\n");
    return {};
  }
  try {
    auto j = nlohmann::json::parse(out.substr(out.find('{')));
    const auto& job = j.at("jobs").at(0).at(read ? "read" : "write");
    const double bw = job.at("bw_bytes").get<double>();
    if (bw <= 0) return {};
    return {bw / 1e9, static_cast<double>(size) / bw * 1e6};
  } catch (const std::exception& e) {
    fmt::print(stderr, "nixl-bench: cannot read fio's output: {}\n", e.what());
    return {};
  }
}

#if defined(NIXL_BENCH_CUDA)
namespace {

/// Memory of one side of the cuda baseline, in the initiator process: cudaMalloc'ed on `gpu`
/// for VRAM, pinned host memory for DRAM.
class cuda_scratch {
 public:
  cuda_scratch(nixl::mem_kind kind, std::size_t n, int gpu) : vram_(kind == nixl::mem_kind::vram) {
    if (vram_) {
      ok_ = cudaSetDevice(gpu) == cudaSuccess && cudaMalloc(&p_, n) == cudaSuccess &&
            cudaMemset(p_, 1, n) == cudaSuccess;
    } else {
      ok_ = cudaMallocHost(&p_, n) == cudaSuccess;
      if (ok_) std::memset(p_, 1, n);
    }
  }
  ~cuda_scratch() {
    if (p_ != nullptr) (void)(vram_ ? cudaFree(p_) : cudaFreeHost(p_));
  }
  cuda_scratch(const cuda_scratch&) = delete;
  cuda_scratch& operator=(const cuda_scratch&) = delete;
  bool ok() const { return ok_ && p_ != nullptr; }
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
  bool vram_;
  bool ok_ = false;
};

}  // namespace

/// What the CUDA runtime itself does for the same blocks between the same two GPUs (or GPU and
/// host): one cudaMemcpyPeerAsync (cudaMemcpyAsync when one side is DRAM) per descriptor on one
/// stream of the executing GPU, then a stream synchronize, with the point's iteration counts.
/// Both buffers live in the initiator process (a peer process's addresses mean nothing here),
/// so the figure is the copy engines' speed between those GPUs, measured in the same run.
baseline_result cuda_baseline(nixl::mem_kind lk, nixl::mem_kind tk, const nb::layout& lay,
                              const nb::point& p, bool read, int lgpu, int tgpu) {
  const std::size_t span = lay.offset(0, p.batch - 1) + lay.block;
  const nixl::mem_kind src_kind = read ? tk : lk, dst_kind = read ? lk : tk;
  const int src_gpu = read ? tgpu : lgpu, dst_gpu = read ? lgpu : tgpu;
  cuda_scratch src(src_kind, span, src_gpu), dst(dst_kind, span, dst_gpu);
  // The stream belongs to the GPU the CUDA backend executes on: the source GPU for VRAM ->
  // VRAM (it pushes), else the GPU side.
  const int exec = src_kind == nixl::mem_kind::vram ? src_gpu : dst_gpu;
  const bool peer = src_kind == nixl::mem_kind::vram && dst_kind == nixl::mem_kind::vram;
  cudaStream_t s{};
  auto bad = [](const char* what, cudaError_t e) {
    fmt::print(stderr, "nixl-bench: cuda baseline: {}: {}; no baseline for this point\n", what,
               cudaGetErrorString(e));
    return baseline_result{};
  };
  if (!src.ok() || !dst.ok()) return bad("allocation", cudaGetLastError());
  if (auto e = cudaSetDevice(exec); e != cudaSuccess) return bad("cudaSetDevice", e);
  if (peer && src_gpu != dst_gpu) {
    int can = 0;
    cudaDeviceCanAccessPeer(&can, exec, exec == src_gpu ? dst_gpu : src_gpu);
    if (can) {
      const auto e = cudaDeviceEnablePeerAccess(exec == src_gpu ? dst_gpu : src_gpu, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        return bad("cudaDeviceEnablePeerAccess", e);
      (void)cudaGetLastError();
    }
  }
  if (auto e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess)
    return bad("cudaStreamCreate", e);
  cudaError_t err = cudaSuccess;
  auto once = [&] {
    for (std::size_t i = 0; i < p.batch && err == cudaSuccess; ++i) {
      const std::size_t off = lay.offset(0, i);
      err =
          peer ? cudaMemcpyPeerAsync(dst.get() + off, dst_gpu, src.get() + off, src_gpu, lay.block,
                                     s)
               : cudaMemcpyAsync(dst.get() + off, src.get() + off, lay.block, cudaMemcpyDefault, s);
    }
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  };
  for (int k = 0; k < p.warmup; ++k) once();
  const auto a = nb::clock::now();
  for (int k = 0; k < p.iters; ++k) once();
  const double us = nb::us_since(a, nb::clock::now());
  cudaStreamDestroy(s);
  if (err != cudaSuccess) return bad(peer ? "cudaMemcpyPeerAsync" : "cudaMemcpyAsync", err);
  return {static_cast<double>(lay.block * p.batch) * p.iters / us / 1e3, us / p.iters};
}
#endif

}  // namespace nixl_bench
