// Waiting through the agent's event fd vs busy polling status(): a 4 KiB WRITE between two
// agents of this process over UCX (loopback), one request in flight at a time. Per mode: the
// time from post to the end seen by the waiting thread (median and p99), and the CPU time of
// the waiting thread (getrusage RUSAGE_THREAD) and of the whole process (RUSAGE_SELF, with the
// progress threads) per request. Modes: busy poll, wait (request::wait: polls for up to the
// agent's wait_spin after the post, then sleeps on the fd), and poll-then-wait (every other
// request busy-polled, the others waited; the waited ones are timed: the waiting thread drove the
// worker just before, so this shows the hand-back to the progress thread; its CPU columns count
// the polled requests too). Prints a table on stdout.
//
//   nixl_wait_bench [requests=20000] [bytes=4096] [progress_spin_us=50] [wait_spin_us=200]
//   UCX_TLS=tcp nixl_wait_bench      # transports on which a put stays in flight after post

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include "bench_common.hpp"

namespace {

using clk = std::chrono::steady_clock;
using ucx_agent = nixl::agent<nixl::ucx::backend>;

using nixl_bench::cpu_us;

struct result {
  double p50_us, p99_us, thread_cpu_us, process_cpu_us, inflight_frac;
  long failures;
};

// Every request polled or waited (`wait`); with `alternate`, even ones busy-polled and only the
// odd (waited) ones timed.
template <class Req, class Wait, class Busy>
result run(Req& r, int n, Wait&& wait, Busy&& busy, bool alternate) {
  std::vector<double> lat;
  lat.reserve(static_cast<std::size_t>(n));
  long inflight = 0, failures = 0;
  const double t0 = cpu_us(RUSAGE_THREAD), p0 = cpu_us(RUSAGE_SELF);
  for (int i = 0; i < n; ++i) {
    if (alternate && i % 2 == 0) {
      if (r.post() == nixl::status::in_progress && busy(r) != nixl::status::success) ++failures;
      continue;
    }
    const auto start = clk::now();
    nixl::status s = r.post();
    if (s == nixl::status::in_progress) {
      ++inflight;
      s = wait(r);
    }
    lat.push_back(std::chrono::duration<double, std::micro>(clk::now() - start).count());
    if (s != nixl::status::success) ++failures;
  }
  const double t1 = cpu_us(RUSAGE_THREAD), p1 = cpu_us(RUSAGE_SELF);
  std::sort(lat.begin(), lat.end());
  const auto m = static_cast<double>(lat.size());
  return {lat[lat.size() / 2], lat[lat.size() * 99 / 100],        (t1 - t0) / m,
          (p1 - p0) / m,       static_cast<double>(inflight) / m, failures};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(100, std::atoi(argv[1])) : 20000;
  const std::size_t bytes =
      argc > 2 ? std::max<std::size_t>(1, std::strtoull(argv[2], nullptr, 10)) : std::size_t{4096};
  // After work the progress thread keeps polling the worker this long (UCX's default 50 us); the
  // posting thread then contends with it for the worker's lock.
  const std::string spin = argc > 3 ? argv[3] : "50";
  const long wait_spin = argc > 4 ? std::atol(argv[4]) : 200;
  std::vector<unsigned char> src(bytes, 1), dst(bytes, 0);
  ucx_agent a("wait-bench-initiator", {.wait_spin = std::chrono::microseconds(wait_spin)}),
      b("wait-bench-target");
  a.create_backend<nixl::ucx::backend>({{"progress_spin_us", spin}});
  b.create_backend<nixl::ucx::backend>({{"progress_spin_us", spin}});
  const auto addr = [](auto& v) { return reinterpret_cast<std::uintptr_t>(v.data()); };
  a.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(src), bytes, 0}, ""}});
  b.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(dst), bytes, 0}, ""}});
  a.load_remote_metadata(b.local_metadata());
  auto r =
      a.create_request(nixl::xfer_op::write, nixl::xfer_list<nixl::dram_t>{{addr(src), bytes, 0}},
                       nixl::xfer_list<nixl::dram_t>{{addr(dst), bytes, 0}}, "wait-bench-target");
  const auto busy = [](auto& q) {
    nixl::status s;
    while ((s = q.status()) == nixl::status::in_progress) {
    }
    return s;
  };
  const auto fd = [](auto& q) { return q.wait(std::chrono::seconds(10)); };
  (void)run(r, n / 10, busy, busy, false);  // warm-up: connections, caches
  (void)run(r, n / 10, fd, busy, false);
  const result rb = run(r, n, busy, busy, false);
  const result rf = run(r, n, fd, busy, false);
  const result rm = run(r, n, fd, busy, true);
  const char* tls = std::getenv("UCX_TLS");
  std::printf(
      "%zu B WRITE, UCX loopback (UCX_TLS=%s, progress_spin_us=%s, wait_spin_us=%ld), %d "
      "requests, one in flight\n",
      bytes, tls != nullptr ? tls : "default", spin.c_str(), wait_spin, n);
  std::printf("%-15s %10s %10s %10s %16s %17s %8s\n", "mode", "p50 us", "p99 us", "in flight",
              "thread CPU us/req", "process CPU us/req", "errors");
  for (const auto& [name, x] :
       {std::pair{"busy poll", rb}, std::pair{"wait", rf}, std::pair{"poll, then wait", rm}})
    std::printf("%-15s %10.2f %10.2f %9.0f%% %16.2f %17.2f %8ld\n", name, x.p50_us, x.p99_us,
                x.inflight_frac * 100, x.thread_cpu_us, x.process_cpu_us, x.failures);
  std::printf("added latency of the wait (p50): %.2f us; after polling: %.2f us\n",
              rf.p50_us - rb.p50_us, rm.p50_us - rb.p50_us);
  return rb.failures + rf.failures + rm.failures == 0 ? 0 : 1;
}
