#pragma once
// The sweep: one point (block size x batch size) run by --num_threads threads in the chosen
// transfer mode, timed, checked and compared with its baseline.

#include <chrono>
#include <cstddef>
#include <cstdio>

#include <fmt/format.h>

#include "bench_common.hpp"
#include "options.hpp"
#include "report.hpp"
#include "segment.hpp"
#include "target.hpp"

namespace nixl_bench {

using namespace std::chrono_literals;

class progress_line {
 public:
  explicit progress_line(bool on) : on_(on) {}
  void update(std::size_t idx, std::size_t n, const nb::point& p, int done) {
    if (!on_) return;
    const auto now = nb::clock::now();
    if (now - last_ < 200ms) return;
    last_ = now;
    fmt::print(stderr, "\r[{}/{}] block {} batch {}: iteration {}/{}\033[K", idx + 1, n,
               nb::size_str(p.block), p.batch, done, p.iters);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) fmt::print(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
  nb::clock::time_point last_{};
};

/// Runs point `p` (number `idx` of `npoints`) from `local` to or from `tgt`; `scratch` is the
/// memcpy baseline's destination.
nb::row run_point(bench_agent& a, const options& o, segment& local, target_side& tgt,
                  const nb::point& p, std::size_t idx, std::size_t npoints, progress_line& prog,
                  nb::host_buffer& scratch);

}  // namespace nixl_bench
