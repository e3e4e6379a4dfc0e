// The copy-request pattern of the UCX backend (VRAM <-> a peer process's DRAM, docs/ucx.md,
// "Copy requests") with nothing of the library in it: the floor of that pattern on this machine.
// Two processes on one GPU. The requester owns the VRAM and exports it (CUDA IPC); the server
// owns the DRAM (malloc'd, then cudaHostRegister'ed, as a peer's registered DRAM is pinned) and
// maps that VRAM. Per request the requester writes the request into a shared-memory mailbox (the
// fastest channel two processes have; the library sends a UCX active message), the server,
// polling that mailbox, issues cudaMemcpyAsync on its stream, records an interprocess event and
// answers through the mailbox; the requester then polls that event until the copy ended, as
// the library's initiator does with the events in the peer's answer. One request in flight, as
// nixl-bench runs. Next to it, in the same run: nixl-bench's anchor, cudaMemcpyAsync between
// the requester's VRAM and its pinned host memory plus a stream synchronize.
//   nixl_copy_request_probe [--max-mib 64] [--iters 200] [--gpu 0]
// Prints, per size and direction, the average µs of a request of each and their ratio
// (anchor / pattern, as nixl-bench's ratio of GB/s). See docs/performance.md.

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <cuda_runtime_api.h>

#include "bench_common.hpp"
#include "check.hpp"

namespace {

namespace nb = nixl_bench;

constexpr std::uint32_t seed = 1;  ///< the data pattern of the requester's VRAM

/// The hot path's channel, in memory shared by both processes. A request is a sequence number
/// (with its size and direction written before it); the answer repeats that number once the
/// copy is issued and its event recorded.
struct mailbox {
  alignas(64) std::atomic<std::uint64_t> req{0};
  std::size_t bytes = 0;
  bool read = false;  ///< DRAM -> VRAM; else VRAM -> DRAM
  alignas(64) std::atomic<std::uint64_t> ack{0};
  alignas(64) std::atomic<bool> bad{false};  ///< the server's last check found a wrong byte
};

constexpr std::uint64_t quit = ~std::uint64_t{0};

int server(mailbox* mb, int from_req, int to_req, std::size_t cap, int gpu) {
  if (cudaSetDevice(gpu) != cudaSuccess) return 3;  // no such GPU: the requester says so
  cudaIpcMemHandle_t h{};
  if (::read(from_req, &h, sizeof h) != static_cast<ssize_t>(sizeof h)) return 1;
  void* vram = nullptr;
  CK(cudaIpcOpenMemHandle(&vram, h, cudaIpcMemLazyEnablePeerAccess));
  void* host = std::aligned_alloc(4096, cap);
  if (host == nullptr) return 1;
  std::memset(host, 0, cap);
  CK(cudaHostRegister(host, cap, cudaHostRegisterDefault));
  cudaStream_t s{};
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev{};
  CK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
  cudaIpcEventHandle_t eh{};
  CK(cudaIpcGetEventHandle(&eh, ev));
  if (::write(to_req, &eh, sizeof eh) != static_cast<ssize_t>(sizeof eh)) return 1;
  std::uint64_t last = 0;
  std::size_t written = 0;  // bytes of the last VRAM -> DRAM copy
  for (;;) {
    std::uint64_t r;
    while ((r = mb->req.load(std::memory_order_acquire)) == last) __builtin_ia32_pause();
    if (r == quit) break;
    last = r;
    if (mb->bytes == 0) {  // a check of the last VRAM -> DRAM copy, not a copy
      CK(cudaStreamSynchronize(s));
      mb->bad.store(nb::check_pattern(host, 0, written, seed).has_value(),
                    std::memory_order_relaxed);
      std::memset(host, 0, written);
    } else {
      if (!mb->read) written = mb->bytes;
      CK(mb->read ? cudaMemcpyAsync(vram, host, mb->bytes, cudaMemcpyDefault, s)
                  : cudaMemcpyAsync(host, vram, mb->bytes, cudaMemcpyDefault, s));
      CK(cudaEventRecord(ev, s));
    }
    mb->ack.store(r, std::memory_order_release);
  }
  CK(cudaStreamSynchronize(s));
  CK(cudaHostUnregister(host));
  std::free(host);
  CK(cudaIpcCloseMemHandle(vram));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_mib = 64;
  int iters = 200, gpu = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--max-mib")
      max_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (a == "--gpu")
      gpu = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--max-mib N] [--iters N] [--gpu N]\n", argv[0]);
      return 2;
    }
  }
  if (max_mib == 0 || iters <= 0) return 2;
  const std::size_t cap = max_mib << 20;
  void* shm =
      ::mmap(nullptr, sizeof(mailbox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) return 1;
  auto* mb = new (shm) mailbox;
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) return 1;
  const pid_t pid = ::fork();  // before any CUDA call of this process
  if (pid == 0) ::_exit(server(mb, down[0], up[1], cap, gpu));

  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= gpu) {
    std::printf("no GPU %d here: nothing measured\n", gpu);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 0;
  }
  CK(cudaSetDevice(gpu));
  void *vram = nullptr, *pinned = nullptr;
  CK(cudaMalloc(&vram, cap));
  CK(cudaMallocHost(&pinned, cap));
  nb::fill_pattern(pinned, 0, cap, seed);
  CK(cudaMemcpy(vram, pinned, cap, cudaMemcpyDefault));
  cudaIpcMemHandle_t h{};
  CK(cudaIpcGetMemHandle(&h, vram));
  if (::write(down[1], &h, sizeof h) != static_cast<ssize_t>(sizeof h)) return 1;
  cudaIpcEventHandle_t eh{};
  if (::read(up[0], &eh, sizeof eh) != static_cast<ssize_t>(sizeof eh)) {
    std::fprintf(stderr, "the server did not start\n");
    return 1;
  }
  cudaEvent_t ev{};
  CK(cudaIpcOpenEventHandle(&ev, eh));
  cudaStream_t s{};
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  std::uint64_t seq = 0;
  auto request = [&](std::size_t bytes, bool read) {
    mb->bytes = bytes;
    mb->read = read;
    mb->req.store(++seq, std::memory_order_release);
    while (mb->ack.load(std::memory_order_acquire) != seq) __builtin_ia32_pause();
  };
  auto pattern = [&](std::size_t bytes, bool read) {
    request(bytes, read);
    cudaError_t e;
    while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
    }
    CK(e);
  };
  auto anchor = [&](std::size_t bytes, bool read) {
    CK(read ? cudaMemcpyAsync(vram, pinned, bytes, cudaMemcpyDefault, s)
            : cudaMemcpyAsync(pinned, vram, bytes, cudaMemcpyDefault, s));
    CK(cudaStreamSynchronize(s));
  };
  auto avg_us = [&](auto&& once, std::size_t bytes, bool read) {
    for (int k = 0; k < iters / 10 + 2; ++k) once(bytes, read);
    const auto a = nb::clock::now();
    for (int k = 0; k < iters; ++k) once(bytes, read);
    return nb::us_since(a, nb::clock::now()) / iters;
  };

  std::printf("%-6s %9s %14s %14s %8s\n", "op", "bytes", "anchor_us", "pattern_us", "ratio");
  int bad = 0;  // sizes whose data came wrong
  for (const bool read : {false, true}) {
    for (std::size_t b = std::size_t{1} << 20; b <= cap; b *= 2) {
      // alternated, so that both see the same state of the machine
      const double a1 = avg_us(anchor, b, read), p1 = avg_us(pattern, b, read);
      const double a2 = avg_us(anchor, b, read), p2 = avg_us(pattern, b, read);
      const double a = (a1 + a2) / 2, p = (p1 + p2) / 2;
      std::printf("%-6s %9zu %14.2f %14.2f %8.3f\n", read ? "READ" : "WRITE", b, a, p, a / p);
      std::fflush(stdout);
      if (!read) {  // the server checks what the last copy brought
        request(0, false);
        bad += mb->bad.load(std::memory_order_relaxed) ? 1 : 0;
      }
    }
  }
  mb->req.store(quit, std::memory_order_release);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (bad != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "FAILED: wrong data at %d sizes, server status %d\n", bad, st);
    return 1;
  }
  return 0;
}
