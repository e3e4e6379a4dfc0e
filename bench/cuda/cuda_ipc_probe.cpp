// How fast the CUDA runtime copies into (and out of) another process's GPU memory, by the way
// the memory is mapped and the copy issued. Two processes: the child allocates on GPU 1 and
// exports CUDA IPC handles; this process copies between its GPU 0 memory and those mappings.
// Each row is the median of --iters copies of one size, each synchronised, next to
// cudaMemcpyPeerAsync between two allocations of this process in the same run.
//   nixl_cuda_ipc_probe [--sizes 16M,256M] [--iters 20]
// See docs/cuda.md ("Across processes").

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "check.hpp"

namespace {

constexpr int handles = 3;

std::size_t parse_size(const std::string& s) {
  std::size_t v = std::strtoull(s.c_str(), nullptr, 10);
  switch (s.back()) {
    case 'K':
      return v << 10;
    case 'M':
      return v << 20;
    case 'G':
      return v << 30;
    default:
      return v;
  }
}

int child(int to_parent, int from_parent, std::size_t bytes) {
  CK(cudaSetDevice(1));
  cudaIpcMemHandle_t h[handles];
  void* p[handles];
  for (int i = 0; i < handles; ++i) {
    CK(cudaMalloc(&p[i], bytes));
    CK(cudaMemset(p[i], 0, bytes));
    CK(cudaIpcGetMemHandle(&h[i], p[i]));
  }
  CK(cudaDeviceSynchronize());
  if (::write(to_parent, h, sizeof h) != static_cast<ssize_t>(sizeof h)) return 1;
  char c;
  (void)::read(from_parent, &c, 1);
  for (auto* x : p) cudaFree(x);
  return 0;
}

template <class Copy>
double median_us(int iters, cudaStream_t s, Copy&& copy) {
  std::vector<double> t;
  for (int i = 0; i < iters + 3; ++i) {
    const auto a = std::chrono::steady_clock::now();
    CK(copy());
    CK(cudaStreamSynchronize(s));
    const auto b = std::chrono::steady_clock::now();
    if (i >= 3) t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes{std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20,
                                 std::size_t{256} << 20};
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iters") iters = std::atoi(argv[i + 1]);
    if (a == "--sizes") {
      sizes.clear();
      std::string v = argv[i + 1];
      for (std::size_t pos = 0; pos <= v.size();) {
        auto c = v.find(',', pos);
        if (c == std::string::npos) c = v.size();
        sizes.push_back(parse_size(v.substr(pos, c - pos)));
        pos = c + 1;
      }
    }
  }
  const std::size_t cap = *std::max_element(sizes.begin(), sizes.end());
  int up[2], down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0) return 1;
  const pid_t pid = ::fork();  // before any CUDA call of this process
  if (pid == 0) ::_exit(child(up[1], down[0], cap));
  cudaIpcMemHandle_t h[handles];
  if (::read(up[0], h, sizeof h) != static_cast<ssize_t>(sizeof h)) {
    std::fprintf(stderr, "the child did not export its memory\n");
    return 1;
  }
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    std::printf("needs 2 GPUs, this process sees %d\n", n);
    return 0;
  }
  void *src = nullptr, *local1 = nullptr;
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&src, cap));
  CK(cudaMemset(src, 7, cap));
  cudaStream_t s0{}, s1{};
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  // mapping A: opened in GPU 1's context (the owner's), before peer access is enabled
  void* on1 = nullptr;
  CK(cudaSetDevice(1));
  CK(cudaIpcOpenMemHandle(&on1, h[0], cudaIpcMemLazyEnablePeerAccess));
  CK(cudaMalloc(&local1, cap));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  // mapping B: opened in GPU 0's context (the copying GPU's), after peer access
  void* on0 = nullptr;
  CK(cudaSetDevice(0));
  CK(cudaIpcOpenMemHandle(&on0, h[1], cudaIpcMemLazyEnablePeerAccess));
  // mapping C: opened in GPU 1's context after peer access was enabled
  void* on1b = nullptr;
  CK(cudaSetDevice(1));
  CK(cudaIpcOpenMemHandle(&on1b, h[2], cudaIpcMemLazyEnablePeerAccess));
  CK(cudaSetDevice(0));

  auto def = [](void* d, const void* sr, std::size_t b, cudaStream_t st) {
    return cudaMemcpyAsync(d, sr, b, cudaMemcpyDefault, st);
  };
  std::printf("%-64s", "GB/s (median of synchronised copies)");
  for (auto b : sizes) std::printf(" %10zu", b);
  std::printf("\n");
  auto row = [&](const char* name, cudaStream_t st, auto&& copy) {
    std::printf("%-64s", name);
    for (auto b : sizes) {
      const double us = median_us(iters, st, [&] { return copy(b); });
      std::printf(" %10.1f", static_cast<double>(b) / us / 1e3);
    }
    std::printf("\n");
    std::fflush(stdout);
  };
  row("in process: cudaMemcpyPeerAsync GPU0 -> GPU1, stream of GPU0", s0,
      [&](std::size_t b) { return cudaMemcpyPeerAsync(local1, 1, src, 0, b, s0); });
  row("in process: cudaMemcpyAsync default GPU0 -> GPU1, stream of GPU0", s0,
      [&](std::size_t b) { return def(local1, src, b, s0); });
  row("A (opened on GPU1 before peer access): MemcpyAsync, GPU0 stream", s0,
      [&](std::size_t b) { return def(on1, src, b, s0); });
  row("A: cudaMemcpyPeerAsync(dst, 1, src, 0), GPU0 stream", s0,
      [&](std::size_t b) { return cudaMemcpyPeerAsync(on1, 1, src, 0, b, s0); });
  row("A: MemcpyAsync, GPU1 stream", s1, [&](std::size_t b) { return def(on1, src, b, s1); });
  row("B (opened on GPU0): MemcpyAsync, GPU0 stream", s0,
      [&](std::size_t b) { return def(on0, src, b, s0); });
  row("B: cudaMemcpyPeerAsync(dst, 0?, src, 0), GPU0 stream", s0,
      [&](std::size_t b) { return cudaMemcpyPeerAsync(on0, 0, src, 0, b, s0); });
  row("C (opened on GPU1 after peer access): MemcpyAsync, GPU0 stream", s0,
      [&](std::size_t b) { return def(on1b, src, b, s0); });
  row("READ: A -> GPU0 MemcpyAsync, GPU1 stream (push)", s1,
      [&](std::size_t b) { return def(src, on1, b, s1); });
  row("READ: A -> GPU0 MemcpyAsync, GPU0 stream (pull)", s0,
      [&](std::size_t b) { return def(src, on1, b, s0); });
  row("READ: B -> GPU0 MemcpyAsync, GPU0 stream (pull)", s0,
      [&](std::size_t b) { return def(src, on0, b, s0); });

  char c = 'x';
  (void)::write(down[1], &c, 1);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return 0;
}
