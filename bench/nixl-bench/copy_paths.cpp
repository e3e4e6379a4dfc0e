// nixl-copy-paths: the ways one host can move bytes between two processes, measured on this
// machine in one run, without UCX or nixl. It separates what a transfer between processes costs
// on a machine from what the library adds (docs/performance.md, "At a glance": the rows "against
// the transport"):
//
//  - syscall floor: CPU time of one process_vm_writev of 64 B and of 4 KiB into a child process
//    (what UCX 1.22's cma transport issues per put or get, once per 512 KiB segment);
//  - ring round trip: 4 KiB copied into a shared-memory ring slot by one process, copied out by
//    the other, which answers through the ring (the shape of an active-message put over UCX's
//    shared-memory transports, both processes spinning; NIXL's UCX 1.13 path);
//  - large block (--bytes, default 64 MiB), wall-clock GB/s, rounds alternating: memcpy in one
//    process (nixl-bench's baseline), process_vm_writev in 512 KiB segments (cma), and the
//    two-process ring of 8 KiB slots (one copy per process, pipelined over two cores), and
//    process_vm_writev from two threads of the writer, a half each, and process_vm_writev of
//    16 KiB blocks 32 KiB apart, one call per block (UCX cma's pattern for a request of
//    scattered blocks: one put each) and 64 blocks a call (the UCX backend's host_dram_copy=cma);
//  - small writes from several threads: process_vm_writev of 8 KiB from 1, 2 and 4 threads of
//    the writer, each into its own pages of the one child (what threads posting on one agent
//    with a worker each do through UCX's cma), calls per second of all threads together.
//
// Every transfer into the child is checked there (a checksum of the destination after the last
// round); a mismatch exits 1. Timing prints only: speed belongs to docs/performance.md.
//   nixl-copy-paths [--bytes N] [--rounds R] [--reps N (small-message repetitions)]

#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

constexpr std::size_t slot_bytes = 8192;  // UCX's mm segment is 8256 bytes
constexpr std::size_t slots = 64;
constexpr std::size_t cma_seg = 512 * 1024;  // UCX_CMA_SEG_SIZE's default

struct ring {
  alignas(64) std::atomic<std::uint64_t> head{0};  // slots written by the parent
  alignas(64) std::atomic<std::uint64_t> tail{0};  // slots consumed by the child
  alignas(64) std::atomic<std::uint64_t> acks{0};  // round trips answered by the child
  alignas(64) std::atomic<int> cmd{0};             // 1 stream, 2 ping-pong, 3 checksum, 9 exit
  std::atomic<int> done{0};
  std::atomic<std::uint64_t> sum{0};
  std::uint64_t len = 0;    // bytes per stream or per ping
  std::uint64_t count = 0;  // repetitions
  alignas(64) char slot[slots][slot_bytes];
};

double wall() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void* map(std::size_t n, bool shared) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE,
                 (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(2);
  }
  return p;
}

std::uint64_t checksum(const unsigned char* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The child: owns `dst` (private memory, the cma target) and serves the ring.
[[noreturn]] void child(ring* r, unsigned char* dst, std::size_t n) {
  std::memset(dst, 0, n);
  r->done.store(1);
  for (;;) {
    int c = 0;
    while ((c = r->cmd.load(std::memory_order_acquire)) == 0) {
    }
    if (c == 9) _exit(0);
    std::uint64_t t = r->tail.load(std::memory_order_relaxed);
    if (c == 1 || c == 2) {
      for (std::uint64_t k = 0; k < r->count; ++k) {
        for (std::size_t off = 0; off < r->len; off += slot_bytes) {
          while (r->head.load(std::memory_order_acquire) == t) {
          }
          const std::size_t len = std::min<std::size_t>(slot_bytes, r->len - off);
          std::memcpy(dst + off, r->slot[t % slots], len);
          r->tail.store(++t, std::memory_order_release);
        }
        if (c == 2) r->acks.fetch_add(1, std::memory_order_release);
      }
    } else if (c == 3) {
      r->sum.store(checksum(dst, r->len));
    }
    r->cmd.store(0, std::memory_order_relaxed);
    r->done.store(1, std::memory_order_release);
  }
}

void command(ring* r, int c, std::uint64_t len, std::uint64_t count) {
  r->len = len;
  r->count = count;
  r->done.store(0, std::memory_order_relaxed);
  r->cmd.store(c, std::memory_order_release);
}

void wait_done(ring* r) {
  while (r->done.load(std::memory_order_acquire) == 0) {
  }
}

// Parent side of the ring: `len` bytes from `src`, `count` times; with `pong`, waits for the
// child's answer after each message (a round trip, as a put plus its flush).
void ring_send(ring* r, const unsigned char* src, std::size_t len, std::uint64_t count, bool pong) {
  command(r, pong ? 2 : 1, len, count);
  std::uint64_t h = r->head.load(std::memory_order_relaxed);
  const std::uint64_t a0 = r->acks.load(std::memory_order_relaxed);
  for (std::uint64_t k = 0; k < count; ++k) {
    for (std::size_t off = 0; off < len; off += slot_bytes) {
      while (h - r->tail.load(std::memory_order_acquire) >= slots) {
      }
      std::memcpy(r->slot[h % slots], src + off, std::min<std::size_t>(slot_bytes, len - off));
      r->head.store(++h, std::memory_order_release);
    }
    if (pong)
      while (r->acks.load(std::memory_order_acquire) != a0 + k + 1) {
      }
  }
  wait_done(r);
}

bool pvw(pid_t pid, const unsigned char* src, unsigned char* dst, std::size_t len) {
  for (std::size_t off = 0; off < len; off += cma_seg) {
    const std::size_t l = std::min(cma_seg, len - off);
    iovec a{const_cast<unsigned char*>(src + off), l};
    iovec b{dst + off, l};
    if (process_vm_writev(pid, &a, 1, &b, 1, 0) != static_cast<ssize_t>(l)) {
      std::fprintf(stderr, "nixl-copy-paths: process_vm_writev: %s\n", std::strerror(errno));
      return false;
    }
  }
  return true;
}

std::string load() {
  char buf[64] = "?";
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  for (int i = 0, sp = 0; i < static_cast<int>(s.size()); ++i)
    if (s[i] == ' ' && ++sp == 3) return s.substr(0, i);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t{64} << 20;
  int rounds = 5;
  int reps = 20000;
  // the options and size suffixes of nixl-bench (options.cpp)
  CLI::App app{"the ways this host moves bytes between two processes", "nixl-copy-paths"};
  app.add_option("--bytes", n, "large block")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 40));
  app.add_option("--rounds", rounds, "large-block rounds")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "small-message repetitions")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  auto* r = new (map(sizeof(ring), true)) ring;
  auto* dst = static_cast<unsigned char*>(map(n, false));
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) child(r, dst, n);
  wait_done(r);
  auto* src = static_cast<unsigned char*>(map(n, false));
  auto* local = static_cast<unsigned char*>(map(n, false));
  std::memset(local, 0, n);
  int rc = 0;

  std::printf("nixl-copy-paths: %ld cores, load %s\n", sysconf(_SC_NPROCESSORS_ONLN),
              load().c_str());
  // Syscall floor and 4 KiB round trip, best of `rounds`.
  double floor64 = 1e9, floor4k = 1e9, wall4k = 1e9, ring4k = 1e9;
  std::memset(src, 1, 4096);
  for (int k = 0; k < rounds && rc == 0; ++k) {
    for (std::size_t len : {std::size_t{64}, std::size_t{4096}}) {
      const double c0 = cpu(), w0 = wall();
      for (int i = 0; i < reps && rc == 0; ++i)
        if (!pvw(pid, src, dst, len)) rc = 1;
      const double c = (cpu() - c0) / reps * 1e6, w = (wall() - w0) / reps * 1e6;
      (len == 64 ? floor64 : floor4k) = std::min(len == 64 ? floor64 : floor4k, c);
      if (len == 4096) wall4k = std::min(wall4k, w);
    }
    const double w0 = wall();
    ring_send(r, src, 4096, reps, true);
    ring4k = std::min(ring4k, (wall() - w0) / reps * 1e6);
  }
  std::printf("  process_vm_writev 64 B: %.3f us CPU per call; 4 KiB: %.3f us CPU, %.3f us wall\n",
              floor64, floor4k, wall4k);
  std::printf("  4 KiB through a shared-memory ring and an answer back (both spinning): %.3f us\n",
              ring4k);

  // Small writes from several threads into the one child, each thread into its own pages.
  {
    constexpr std::size_t small = 8192;
    const int max_threads = 4;
    const std::size_t region = n / max_threads / small * small;
    double rate[max_threads + 1] = {};
    for (int k = 0; k < rounds && rc == 0 && region >= small; ++k) {
      for (int threads : {1, 2, 4}) {
        std::atomic<bool> ok{true};
        const double t = wall();
        std::vector<std::thread> pool;
        for (int th = 0; th < threads; ++th)
          pool.emplace_back([&, th] {
            const std::size_t base = static_cast<std::size_t>(th) * region;
            for (int i = 0; i < reps; ++i) {
              const std::size_t off = base + (static_cast<std::size_t>(i) * small) % region;
              if (!pvw(pid, src + off, dst + off, small)) {
                ok = false;
                return;
              }
            }
          });
        for (auto& th : pool) th.join();
        if (!ok) rc = 1;
        rate[threads] =
            std::max(rate[threads], static_cast<double>(reps) * threads / (wall() - t) / 1e6);
      }
    }
    std::printf(
        "  process_vm_writev of 8 KiB from 1 / 2 / 4 threads into one process: %.2f / "
        "%.2f / %.2f M calls/s (%.2fx / %.2fx of one thread)\n",
        rate[1], rate[2], rate[4], rate[2] / rate[1], rate[4] / rate[1]);
  }

  // Large block, alternating.
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  double best[6] = {0, 0, 0, 0, 0, 0};
  constexpr std::size_t scat_block = 16384, scat_stride = 2 * scat_block;
  double memcpy_cpu = 1e9, cma_cpu = 1e9;
  for (int k = 0; k < rounds && rc == 0; ++k) {
    double t = wall();
    double c0 = cpu();
    std::memcpy(local, src, n);
    memcpy_cpu = std::min(memcpy_cpu, cpu() - c0);
    best[0] = std::max(best[0], static_cast<double>(n) / (wall() - t) / 1e9);
    t = wall();
    c0 = cpu();
    if (!pvw(pid, src, dst, n)) rc = 1;
    cma_cpu = std::min(cma_cpu, cpu() - c0);
    best[1] = std::max(best[1], static_cast<double>(n) / (wall() - t) / 1e9);
    t = wall();
    ring_send(r, src, n, 1, false);
    best[2] = std::max(best[2], static_cast<double>(n) / (wall() - t) / 1e9);
    // Two threads, each writing half (segment-aligned) with process_vm_writev.
    const std::size_t half = (n / 2 + cma_seg - 1) / cma_seg * cma_seg;
    bool ok2 = true;
    t = wall();
    std::thread second([&] { ok2 = half >= n || pvw(pid, src + half, dst + half, n - half); });
    if (!pvw(pid, src, dst, std::min(half, n))) rc = 1;
    second.join();
    if (!ok2) rc = 1;
    best[3] = std::max(best[3], static_cast<double>(n) / (wall() - t) / 1e9);
    t = wall();
    std::size_t moved = 0;
    for (std::size_t off = 0; off + scat_block <= n && rc == 0;
         off += scat_stride, moved += scat_block)
      if (!pvw(pid, src + off, dst + off, scat_block)) rc = 1;
    best[4] = std::max(best[4], static_cast<double>(moved) / (wall() - t) / 1e9);
    // the same blocks, 64 a call
    t = wall();
    moved = 0;
    std::vector<iovec> from, to;
    for (std::size_t off = 0; off + scat_block <= n; off += scat_stride) {
      from.push_back({src + off, scat_block});
      to.push_back({dst + off, scat_block});
    }
    for (std::size_t i = 0; i < from.size() && rc == 0; i += 64) {
      const std::size_t k = std::min<std::size_t>(64, from.size() - i);
      if (process_vm_writev(pid, &from[i], k, &to[i], k, 0) !=
          static_cast<ssize_t>(k * scat_block)) {
        std::fprintf(stderr, "nixl-copy-paths: process_vm_writev: %s\n", std::strerror(errno));
        rc = 1;
      }
      moved += k * scat_block;
    }
    best[5] = std::max(best[5], static_cast<double>(moved) / (wall() - t) / 1e9);
  }
  std::printf("  %zu bytes, best of %d, alternating (GB/s, ratio to memcpy):\n", n, rounds);
  std::printf("    memcpy, one process                 %7.2f  1.00  (CPU %.2f ms)\n", best[0],
              memcpy_cpu * 1e3);
  std::printf(
      "    process_vm_writev, 512 KiB segments %7.2f  %.2f  (CPU %.2f ms: %.2f of memcpy's)\n",
      best[1], best[1] / best[0], cma_cpu * 1e3, memcpy_cpu / cma_cpu);
  std::printf("    two-process ring of 8 KiB slots     %7.2f  %.2f\n", best[2], best[2] / best[0]);
  std::printf("    process_vm_writev, two threads      %7.2f  %.2f\n", best[3], best[3] / best[0]);
  std::printf(
      "    process_vm_writev, 16 KiB scattered %7.2f  %.2f  (a call per block, 32 KiB apart)\n",
      best[4], best[4] / best[0]);
  std::printf("    process_vm_writev, 64 blocks a call %7.2f  %.2f  (the same blocks, 64 a call)\n",
              best[5], best[5] / best[0]);

  // The child's buffer must equal what the last round sent (two threads of process_vm_writev),
  // then what the ring and one more process_vm_writev send.
  auto verify = [&](const unsigned char* want, const char* how) {
    command(r, 3, n, 0);
    wait_done(r);
    if (r->sum.load() != checksum(want, n)) {
      std::fprintf(stderr, "nixl-copy-paths: after %s the child's buffer does not match\n", how);
      rc = 1;
    }
  };
  if (rc == 0) verify(src, "two threads of process_vm_writev");
  std::memset(local, 0x5a, n);
  if (rc == 0 && pvw(pid, local, dst, n)) verify(local, "process_vm_writev");
  if (rc == 0) {
    ring_send(r, src, n, 1, false);
    verify(src, "the ring");
  }
  command(r, 9, 0, 0);
  waitpid(pid, nullptr, 0);
  return rc;
}
