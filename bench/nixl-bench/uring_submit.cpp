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

namespace {

constexpr std::size_t inline_budget = std::size_t{256} << 10;  // engine_uring.cpp's

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::size_t parse_size(const char* s) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (end != nullptr && (*end == 'K' || *end == 'k')) v <<= 10;
  if (end != nullptr && (*end == 'M' || *end == 'm')) v <<= 20;
  if (end != nullptr && (*end == 'G' || *end == 'g')) v <<= 30;
  return static_cast<std::size_t>(v);
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
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--write") {
      write = true;
      continue;
    }
    if (v == nullptr) {
      std::fprintf(stderr, "nixl-uring-submit: %s needs a value\n", a.c_str());
      return 2;
    }
    ++i;
    if (a == "--dir")
      dir = v;
    else if (a == "--start")
      start = parse_size(v);
    else if (a == "--max")
      max = parse_size(v);
    else if (a == "--iter")
      iter = std::atoi(v);
    else if (a == "--warmup")
      warmup = std::atoi(v);
    else if (a == "--large_ftr")
      large_ftr = std::atoi(v);
    else if (a == "--depth")
      depth = static_cast<unsigned>(std::atoi(v));
    else {
      std::fprintf(stderr, "nixl-uring-submit: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (start == 0 || max < start || iter < 1 || warmup < 0 || large_ftr < 1 || depth < 1 ||
      depth > 4096) {
    std::fprintf(stderr, "nixl-uring-submit: bad sizes or counts\n");
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
