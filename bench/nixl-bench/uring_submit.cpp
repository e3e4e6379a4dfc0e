// nixl-uring-submit: what io_uring itself costs a poster on this machine, in the POSIX backend's
// exact pattern and without the library, so that nixl-bench's POSIX post times can be read
// against it in the same run (bench/nixl-bench/post-times.sh, docs/performance.md).
//
// The pattern of a POSIX request of one descriptor on the io_uring engine: a ring of
// `--depth` entries (completion queue twice that) with an eventfd registered for completions;
// one read (or write) of the whole block per request into a buffer at file offset 0; a buffered
// read longer than 256 KiB, the engine's inline budget, marked IOSQE_ASYNC (the kernel's
// workers copy it; a shorter one is copied inside io_uring_enter); the submitter busy-polls the
// completion queue until the request ends, then submits the next. Reported per block size: the
// time of io_uring_submit (average, p50, p99) and the GB/s of the whole loop.
//
// Every read is checked against the pattern written first (a mismatch exits 1). Timing prints
// only: speed belongs to docs/performance.md.
//   nixl-uring-submit [--dir D] [--start N] [--max N] [--iter N] [--warmup N] [--large_ftr N]
//                     [--write] [--depth N]

#include <fcntl.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

constexpr std::size_t inline_budget = std::size_t{256} << 10;  // engine_uring.cpp's

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "nixl-uring-submit: %s: %s\n", what, std::strerror(err));
  std::exit(2);
}

unsigned char pattern_byte(std::size_t i) {
  return static_cast<unsigned char>((i * 131) >> 7);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  std::size_t start = 4096, max = std::size_t{64} << 20;
  int iter = 200, warmup = 10, large_ftr = 4;
  unsigned depth = 256;
  bool write = false;
  // the options and size suffixes of nixl-bench (options.cpp)
  CLI::App app{"io_uring_submit alone in the POSIX engine's pattern", "nixl-uring-submit"};
  app.add_option("--dir", dir, "folder of the scratch file");
  app.add_option("--start", start, "first block size")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber);
  app.add_option("--max", max, "last block size")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  app.add_option("--iter", iter, "measured requests per size")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed requests per size")->check(CLI::NonNegativeNumber);
  app.add_option("--large_ftr", large_ftr, "divide --iter by this above 1 MiB blocks")
      ->check(CLI::PositiveNumber);
  app.add_option("--depth", depth, "ring entries")->check(CLI::Range(1u, 4096u));
  app.add_flag("--write", write, "buffered writes instead of reads");
  CLI11_PARSE(app, argc, argv);
  if (max < start) {
    std::fprintf(stderr, "nixl-uring-submit: --max below --start\n");
    return 2;
  }

  const std::string path = dir + "/nixl-uring-submit." + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die(path.c_str(), errno);
  ::unlink(path.c_str());
  std::vector<unsigned char> src(max), buf(max);
  for (std::size_t i = 0; i < max; ++i) src[i] = pattern_byte(i);
  if (::pwrite(fd, src.data(), max, 0) != static_cast<ssize_t>(max)) die("pwrite", errno);

  io_uring ring{};
  io_uring_params p{};
  p.flags = IORING_SETUP_CQSIZE;
  p.cq_entries = depth * 2;
  if (int r = io_uring_queue_init_params(depth, &ring, &p); r < 0) die("io_uring_queue_init", -r);
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd >= 0) io_uring_register_eventfd(&ring, efd);

  std::printf(
      "nixl-uring-submit: io_uring %s, buffered, 1 operation per request, depth %u, "
      "IOSQE_ASYNC past %zu KiB (reads), busy poll\n",
      write ? "WRITE" : "READ", depth, inline_budget >> 10);
  std::printf("%14s %10s %12s %12s %12s %8s\n", "Block Size (B)", "GB/s", "Avg Submit",
              "P50 Submit", "P99 Submit", "Check");
  std::printf("%14s %10s %12s %12s %12s %8s\n", "", "", "(us)", "(us)", "(us)", "");
  int failed = 0;
  for (std::size_t len = start; len <= max; len *= 2) {
    const int n = len > (std::size_t{1} << 20) ? std::max(1, iter / large_ftr) : iter;
    std::vector<double> submit;
    submit.reserve(static_cast<std::size_t>(n));
    bool ok = true;
    double t_start = 0;
    for (int k = 0; k < warmup + n; ++k) {
      if (k == warmup) t_start = now_us();
      if (!write) std::memset(buf.data(), 0, std::min<std::size_t>(len, 64));
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (write)
        io_uring_prep_write(sqe, fd, src.data(), static_cast<unsigned>(len), 0);
      else
        io_uring_prep_read(sqe, fd, buf.data(), static_cast<unsigned>(len), 0);
      if (!write && len > inline_budget) io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
      const double t0 = now_us();
      if (int r = io_uring_submit(&ring); r < 0) die("io_uring_submit", -r);
      const double t1 = now_us();
      io_uring_cqe* cqe = nullptr;
      while (io_uring_peek_cqe(&ring, &cqe) != 0) {
      }
      const int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (res != static_cast<int>(len)) {
        std::fprintf(stderr, "nixl-uring-submit: %zu B: result %d\n", len, res);
        ok = false;
      }
      if (k >= warmup) submit.push_back(t1 - t0);
    }
    const double secs = (now_us() - t_start) * 1e-6;
    if (!write && std::memcmp(buf.data(), src.data(), len) != 0) ok = false;
    failed += ok ? 0 : 1;
    double sum = 0;
    for (double s : submit) sum += s;
    std::sort(submit.begin(), submit.end());
    const auto at = [&](double q) {
      return submit[std::min(submit.size() - 1, static_cast<std::size_t>(q * submit.size()))];
    };
    std::printf("%14zu %10.3f %12.2f %12.2f %12.2f %8s\n", len,
                static_cast<double>(len) * n / secs * 1e-9, sum / submit.size(), at(0.5), at(0.99),
                ok ? "ok" : "FAILED");
  }
  io_uring_queue_exit(&ring);
  if (efd >= 0) ::close(efd);
  ::close(fd);
  return failed == 0 ? 0 : 1;
}
