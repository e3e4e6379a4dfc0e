#pragma once
/// Pieces of nixl-bench that other benchmarks reuse: sizes, the data pattern, page-backed
/// buffers, timing statistics and the sweep's point list.

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace nixl_bench {

using clock = std::chrono::steady_clock;

inline double us_since(clock::time_point a, clock::time_point b) noexcept {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

/// CPU time (user and system) of the whole process (RUSAGE_SELF) or of the calling thread
/// (RUSAGE_THREAD), us.
inline double cpu_us(int who = RUSAGE_SELF) noexcept {
  rusage u{};
  ::getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// "4K", "1M", "64M", "3G", or bytes.
inline std::string size_str(std::size_t n) {
  constexpr const char* unit[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && n >= 1024 && n % 1024 == 0) {
    n /= 1024;
    ++u;
  }
  return fmt::format("{}{}", n, unit[u]);
}

/// Byte `off` of pattern `seed`: differs between neighbouring bytes, pages and seeds, so that
/// a misplaced, stale or partial copy is caught.
inline std::uint8_t pattern_byte(std::size_t off, std::uint32_t seed) noexcept {
  std::uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x >> (8 * (off & 7)));
}

/// Writes pattern `seed` over [p, p+len), indexed from offset `off`.
inline void fill_pattern(void* p, std::size_t off, std::size_t len, std::uint32_t seed) noexcept {
  auto* b = static_cast<std::uint8_t*>(p);
  for (std::size_t i = 0; i < len; ++i) b[i] = pattern_byte(off + i, seed);
}

/// Index (relative to `p`) of the first byte that does not hold pattern `seed`, if any.
inline std::optional<std::size_t> check_pattern(const void* p, std::size_t off, std::size_t len,
                                                std::uint32_t seed) noexcept {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::size_t i = 0; i < len; ++i)
    if (b[i] != pattern_byte(off + i, seed)) return i;
  return std::nullopt;
}

/// Anonymous, page-aligned, pre-faulted memory (so the first iteration does not pay for page
/// faults).
class host_buffer {
 public:
  host_buffer() = default;
  explicit host_buffer(std::size_t n) : n_(n) {
    if (n == 0) return;
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                     -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    p_ = static_cast<std::uint8_t*>(p);
    std::memset(p_, 0, n);
  }
  host_buffer(host_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  host_buffer& operator=(host_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~host_buffer() {
    if (p_ != nullptr) ::munmap(p_, n_);
  }
  std::uint8_t* data() const noexcept { return p_; }
  std::uintptr_t addr() const noexcept { return reinterpret_cast<std::uintptr_t>(p_); }
  std::size_t size() const noexcept { return n_; }

 private:
  std::uint8_t* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Average and 99th percentile of a sample (in place: reorders it).
struct summary {
  double avg = 0, p99 = 0;
};
inline summary summarize(std::vector<double>& v) {
  summary s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.avg = sum / static_cast<double>(v.size());
  const std::size_t k = std::min(v.size() - 1, (v.size() * 99 + 99) / 100 - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  s.p99 = v[k];
  return s;
}

/// The median of a sample (in place: reorders it); 0 for an empty one.
inline double median(std::vector<double>& v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

/// One (block size, batch size) point of a sweep.
struct point {
  std::size_t block = 0;
  std::size_t batch = 0;
  int iters = 0;
  int warmup = 0;
};

/// nixlbench's sweep: block sizes double from start to max, batch sizes double from start to
/// max; iterations are divided by `large_factor` above 1 MiB.
inline std::vector<point> sweep_points(std::size_t start_block, std::size_t max_block,
                                       std::size_t start_batch, std::size_t max_batch, int iters,
                                       int warmup, int large_factor) {
  std::vector<point> out;
  for (std::size_t b = start_block; b <= max_block; b *= 2) {
    for (std::size_t n = start_batch; n <= max_batch; n *= 2) {
      point p{b, n, iters, warmup};
      if (b > (1u << 20) && large_factor > 1) {
        p.iters = std::max(1, iters / large_factor);
        p.warmup = std::max(0, warmup / large_factor);
      }
      out.push_back(p);
      if (n == 0) break;
    }
    if (b == 0) break;
  }
  return out;
}

/// Offset of descriptor `i` of thread `t`: blocks follow each other, or leave a block-sized
/// gap between them (`scatter`) so that the agent cannot merge neighbours into one.
struct layout {
  std::size_t block = 0;
  std::size_t stride = 0;
  std::size_t per_thread = 0;
  std::size_t offset(int thread, std::size_t i) const noexcept {
    return static_cast<std::size_t>(thread) * per_thread + i * stride;
  }
};

}  // namespace nixl_bench
