// Per-request costs of the agent and request layers, over a backend that moves nothing
// (noop_backend.hpp): making a request (run-time and typed paths, from lists or from prepared
// lists with indices), post + status, release, and preparing lists of 1, 256, 65536 and 1M
// descriptors. Descriptors are 64 bytes with 64-byte gaps, so none are merged. The `*_threads`
// benchmarks run 1, 2 and 4 threads on one agent in `thread_sync::rw` (each thread its own
// requests), to show how the agent's own bookkeeping scales; compare items_per_second. The
// `allocs` counter is the heap allocations per iteration (per thread).
//
//   nixl_micro_bench [--benchmark_filter=...] [--benchmark_format=json]

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include <nixl/agent.hpp>

#include "noop_backend.hpp"

#if defined(__GNUC__) && !defined(__clang__)
// operator delete below frees what operator new malloc'd; GCC cannot see that pairing.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// Counting allocations: every operator new of the calling thread counts.
namespace {
thread_local std::uint64_t t_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
  ++t_allocs;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

using noop = nixl::bench::noop_backend;
using agent = nixl::agent<noop>;

constexpr std::uintptr_t local_base = std::uintptr_t{1} << 32;
constexpr std::uintptr_t remote_base = std::uintptr_t{1} << 40;
constexpr std::size_t span = std::size_t{1} << 30;  // fake addresses: nothing is touched
constexpr std::size_t len = 64, stride = 128;

/// One agent per `polls` setting, its range registered once.
agent& the_agent(int polls = 0) {
  static std::map<int, std::unique_ptr<agent>> agents;
  auto& a = agents[polls];
  if (!a) {
    a = std::make_unique<agent>("micro-" + std::to_string(polls));
    a->create_backend<noop>({{"polls", std::to_string(polls)}});
    a->register_memory(
        nixl::reg_list<nixl::dram_t>{{{local_base, span, 0}, ""}, {{remote_base, span, 0}, ""}});
  }
  return *a;
}

nixl::xfer_list<nixl::dram_t> make_list(std::uintptr_t base, std::size_t n) {
  nixl::xfer_list<nixl::dram_t> l;
  l.reserve(n);
  for (std::size_t i = 0; i < n; ++i) l.push_back({base + i * stride, len, 0});
  return l;
}

/// Cached pair of lists of `n` descriptors.
const std::pair<nixl::xfer_list<nixl::dram_t>, nixl::xfer_list<nixl::dram_t>>& lists(
    std::size_t n) {
  static std::map<std::size_t,
                  std::pair<nixl::xfer_list<nixl::dram_t>, nixl::xfer_list<nixl::dram_t>>>
      cache;
  auto it = cache.find(n);
  if (it == cache.end())
    it =
        cache.emplace(n, std::make_pair(make_list(local_base, n), make_list(remote_base, n))).first;
  return it->second;
}

nixl::xfer_options opts() {
  nixl::xfer_options o;
  o.backends = {"NOOP"};
  return o;
}

void counts(benchmark::State& s, std::size_t n) {
  s.SetItemsProcessed(static_cast<std::int64_t>(s.iterations() * n));
  s.counters["descs"] = static_cast<double>(n);
}

/// Reports the allocations of the calling thread per iteration since `start`.
void allocs(benchmark::State& s, std::uint64_t start) {
  s.counters["allocs"] = benchmark::Counter(
      static_cast<double>(t_allocs - start) / static_cast<double>(s.iterations()),
      benchmark::Counter::kAvgThreads);
}

// Prep: resolving a list once

/// The list sizes (1 to 1M descriptors) of the benchmarks over one list, timed in µs.
void list_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(256)->Arg(65536)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
}

void prepare_list_local(benchmark::State& s) {
  auto& a = the_agent();
  const auto n = static_cast<std::size_t>(s.range(0));
  const nixl::xfer_dlist& l = lists(n).first;
  for (auto _ : s) {
    auto p = a.prepare_list(l);
    benchmark::DoNotOptimize(p);
  }
  counts(s, n);
}
BENCHMARK(prepare_list_local)->Apply(list_sizes);

void prepare_list_remote(benchmark::State& s) {
  auto& a = the_agent();
  const auto n = static_cast<std::size_t>(s.range(0));
  const nixl::xfer_dlist& r = lists(n).second;
  for (auto _ : s) {
    auto p = a.prepare_list(a.name(), r);
    benchmark::DoNotOptimize(p);
  }
  counts(s, n);
}
BENCHMARK(prepare_list_remote)->Apply(list_sizes);

// Make: a request from two lists (includes its release at the end of the iteration)

void create_request(benchmark::State& s) {
  auto& a = the_agent();
  const auto n = static_cast<std::size_t>(s.range(0));
  const auto& [l, r] = lists(n);
  const auto o = opts();
  for (auto _ : s) {
    auto q = a.create_request(nixl::xfer_op::write, static_cast<const nixl::xfer_dlist&>(l),
                              static_cast<const nixl::xfer_dlist&>(r), a.name(), o);
    benchmark::DoNotOptimize(q);
  }
  counts(s, n);
}
BENCHMARK(create_request)->Apply(list_sizes);

void create_request_typed(benchmark::State& s) {
  auto& a = the_agent();
  const auto n = static_cast<std::size_t>(s.range(0));
  const auto& [l, r] = lists(n);
  for (auto _ : s) {
    auto q = a.create_request(nixl::xfer_op::write, l, r, a.name());
    benchmark::DoNotOptimize(q);
  }
  counts(s, n);
}
BENCHMARK(create_request_typed)->Apply(list_sizes);

// Make from prepared lists with indices

void make_request(benchmark::State& s) {
  auto& a = the_agent();
  const auto n = static_cast<std::size_t>(s.range(0));
  const auto& [l, r] = lists(n);
  auto pl = a.prepare_list(static_cast<const nixl::xfer_dlist&>(l));
  auto pr = a.prepare_list(a.name(), static_cast<const nixl::xfer_dlist&>(r));
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  const auto o = opts();
  for (auto _ : s) {
    auto q = a.make_request(nixl::xfer_op::write, pl, idx, pr, idx, o);
    benchmark::DoNotOptimize(q);
  }
  counts(s, n);
}
BENCHMARK(make_request)->Apply(list_sizes);

// Post and status

/// post() then status() until the request is done; the final status.
template <class Request>
nixl::status run_to_completion(Request& q) {
  auto st = q.post();
  while (st == nixl::status::in_progress) st = q.status();
  return st;
}

/// The timed loop of the post_status benchmarks: one request, reposted.
template <class Request>
void repost_loop(benchmark::State& s, Request& q) {
  for (auto _ : s) benchmark::DoNotOptimize(run_to_completion(q));
  s.SetItemsProcessed(s.iterations());
}

/// post() then status() until done; polls = how often the backend says in_progress first.
void post_status(benchmark::State& s) {
  const int polls = static_cast<int>(s.range(0));
  auto& a = the_agent(polls);
  const auto& [l, r] = lists(1);
  auto q = a.create_request(nixl::xfer_op::write, static_cast<const nixl::xfer_dlist&>(l),
                            static_cast<const nixl::xfer_dlist&>(r), a.name(), opts());
  repost_loop(s, q);
}
BENCHMARK(post_status)->Arg(0)->Arg(1)->ArgName("polls");

void post_status_typed(benchmark::State& s) {
  const int polls = static_cast<int>(s.range(0));
  auto& a = the_agent(polls);
  const auto& [l, r] = lists(1);
  auto q = a.create_request(nixl::xfer_op::write, l, r, a.name());
  repost_loop(s, q);
}
BENCHMARK(post_status_typed)->Arg(0)->Arg(1)->ArgName("polls");

/// status() of a finished request: the sticky fast path.
void status_done(benchmark::State& s) {
  auto& a = the_agent();
  const auto& [l, r] = lists(1);
  auto q = a.create_request(nixl::xfer_op::write, static_cast<const nixl::xfer_dlist&>(l),
                            static_cast<const nixl::xfer_dlist&>(r), a.name(), opts());
  (void)q.post();
  for (auto _ : s) benchmark::DoNotOptimize(q.status());
}
BENCHMARK(status_done);

// Release

/// release() of one made (and completed) request; requests are made 1024 at a time, untimed.
void release(benchmark::State& s) {
  auto& a = the_agent();
  const auto& [l, r] = lists(1);
  const auto o = opts();
  std::vector<agent::xfer_request> pool;
  std::size_t next = 0;
  for (auto _ : s) {
    if (next == pool.size()) {
      s.PauseTiming();
      pool.clear();
      for (int i = 0; i < 1024; ++i) {
        pool.push_back(a.create_request(nixl::xfer_op::write,
                                        static_cast<const nixl::xfer_dlist&>(l),
                                        static_cast<const nixl::xfer_dlist&>(r), a.name(), o));
        (void)pool.back().post();
      }
      next = 0;
      s.ResumeTiming();
    }
    benchmark::DoNotOptimize(pool[next++].release());
  }
}
BENCHMARK(release);

/// The whole one-shot life of a 1-descriptor request: make, post, status, release.
void lifecycle(benchmark::State& s) {
  auto& a = the_agent();
  const auto& [l, r] = lists(1);
  const auto o = opts();
  const auto start = t_allocs;
  for (auto _ : s) {
    auto q = a.create_request(nixl::xfer_op::write, static_cast<const nixl::xfer_dlist&>(l),
                              static_cast<const nixl::xfer_dlist&>(r), a.name(), o);
    benchmark::DoNotOptimize(run_to_completion(q));
    benchmark::DoNotOptimize(q.release());
  }
  allocs(s, start);
}
BENCHMARK(lifecycle);

/// The same with the typed request.
void lifecycle_typed(benchmark::State& s) {
  auto& a = the_agent();
  const auto& [l, r] = lists(1);
  const auto start = t_allocs;
  for (auto _ : s) {
    auto q = a.create_request(nixl::xfer_op::write, l, r, a.name());
    benchmark::DoNotOptimize(run_to_completion(q));
    benchmark::DoNotOptimize(q.release());
  }
  allocs(s, start);
}
BENCHMARK(lifecycle_typed);

// Threads on one agent (thread_sync::rw)

/// One agent in `thread_sync::rw` whose backend says `in_progress` once per post, so that both
/// post and status take the agent's lock; created once, before the threads run.
agent& rw_agent() {
  static const std::unique_ptr<agent> a = [] {
    auto p = std::make_unique<agent>("micro-rw", nixl::agent_config{.sync = nixl::thread_sync::rw});
    p->create_backend<noop>({{"polls", "1"}});
    p->register_memory(
        nixl::reg_list<nixl::dram_t>{{{local_base, span, 0}, ""}, {{remote_base, span, 0}, ""}});
    return p;
  }();
  return *a;
}

/// A thread's own one-descriptor lists (at an offset of its own).
std::pair<nixl::xfer_list<nixl::dram_t>, nixl::xfer_list<nixl::dram_t>> thread_lists(
    const benchmark::State& s) {
  const auto off = static_cast<std::uintptr_t>(s.thread_index()) * (std::uintptr_t{1} << 20);
  return {make_list(local_base + off, 1), make_list(remote_base + off, 1)};
}

/// post + status until done on a request of each thread's own.
void post_status_threads(benchmark::State& s) {
  auto& a = rw_agent();
  const auto [l, r] = thread_lists(s);
  auto q = a.create_request(nixl::xfer_op::write, l, r, a.name());
  repost_loop(s, q);
}
BENCHMARK(post_status_threads)->ThreadRange(1, 4)->UseRealTime();

/// The same with an agent per thread (`thread_sync::none`): nothing shared, the ceiling that the
/// host allows for `post_status_threads` (on a loaded host it scales less than the core count).
void post_status_threads_apart(benchmark::State& s) {
  agent own("micro-apart-" + std::to_string(s.thread_index()));
  own.create_backend<noop>({{"polls", "1"}});
  own.register_memory(
      nixl::reg_list<nixl::dram_t>{{{local_base, span, 0}, ""}, {{remote_base, span, 0}, ""}});
  const auto [l, r] = thread_lists(s);
  auto q = own.create_request(nixl::xfer_op::write, l, r, own.name());
  repost_loop(s, q);
}
BENCHMARK(post_status_threads_apart)->ThreadRange(1, 4)->UseRealTime();

/// make + post + status + release on each thread.
void lifecycle_threads(benchmark::State& s) {
  auto& a = rw_agent();
  const auto [l, r] = thread_lists(s);
  const auto start = t_allocs;
  for (auto _ : s) {
    auto q = a.create_request(nixl::xfer_op::write, l, r, a.name());
    benchmark::DoNotOptimize(run_to_completion(q));
    benchmark::DoNotOptimize(q.release());
  }
  s.SetItemsProcessed(s.iterations());
  allocs(s, start);
}
BENCHMARK(lifecycle_threads)->ThreadRange(1, 4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
