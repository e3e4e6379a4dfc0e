// The sweep's points: the worker threads, the transfer modes (nixlbench's repost, recreate and
// prepared, and the added pipelined reposts and re-registration), the data check and the
// baseline of each point.

#include "sweep.hpp"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <latch>
#include <thread>
#include <vector>

#include "baselines.hpp"

namespace nixl_bench {
namespace {

struct thread_out {
  std::vector<double> prep, post, tx;
  nb::clock::time_point start, end;
  double cpu_start_us = 0;   ///< the process's CPU time at `start` (thread 0 only)
  double thread_cpu_us = 0;  ///< this thread's CPU time from `start` to `end`
  std::size_t descs = 0;
  std::exception_ptr err;
};

nixl::status wait(bench_agent::xfer_request& r, nixl::status s, target_side& tgt,
                  const options& o) {
  while (s == nixl::status::in_progress) {
    tgt.idle();
    if (o.wait) {  // request::wait: its spin, then the agent's event fd
      s = r.wait(std::chrono::milliseconds(10));
      continue;
    }
    if (o.yield) std::this_thread::yield();
    s = r.status();
  }
  return s;
}

/// Requests of one thread that are in flight together (--pipeline_depth, repost mode).
std::size_t pipelined_blocks(const options& o) {
  return o.xfer_mode == "repost" ? static_cast<std::size_t>(o.pipeline_depth) : 1;
}

void must(nixl::status s, const char* what) {
  if (s != nixl::status::success)
    fail(fmt::format("{}: transfer ended with {}", what, nixl::to_string(s)));
}

// Modes added to nixlbench's: pipelined reposts, re-registration

/// `--pipeline_depth D` (repost mode): D requests of `batch` blocks each, on consecutive blocks
/// of the thread's range, all in flight; each is reposted as soon as it completes. The warm-up
/// posts drain before the timed ones start. Tx is one request, from its post() until status()
/// reports success; prep (making the D requests, per request) is reported once.
template <class Start, class Record>
void repost_pipelined(bench_agent& a, const options& o, const segment& local, target_side& tgt,
                      const nb::layout& lay, int t, const nb::point& p,
                      const nixl::xfer_options& xo, thread_out& out, Start&& mark_start,
                      Record&& record) {
  const auto depth = static_cast<std::size_t>(o.pipeline_depth);
  std::vector<bench_agent::xfer_request> reqs;
  reqs.reserve(depth);
  const auto t0 = nb::clock::now();
  for (std::size_t d = 0; d < depth; ++d) {
    nixl::xfer_dlist l(local.kind()), r(tgt.kind());
    for (std::size_t i = 0; i < p.batch; ++i) {
      const std::size_t off = lay.offset(t, d * p.batch + i);
      l.push_back(local.at(off, p.block));
      r.push_back(tgt.at(off, p.block));
    }
    reqs.push_back(a.create_request(o.op(), l, r, tgt.agent(), xo));
  }
  const double prep = nb::us_since(t0, nb::clock::now()) / static_cast<double>(depth);
  out.descs = reqs[0].descriptor_count();

  struct flight {
    int iter = 0;
    nb::clock::time_point t1, t2;
    bool busy = false;
  };
  std::vector<flight> fl(depth);
  int next = 0;
  // Posts request d until one stays in flight (true) or `end` iterations were posted (false).
  auto launch = [&](std::size_t d, int end) {
    while (next < end) {
      flight& f = fl[d];
      f.iter = next++;
      f.t1 = nb::clock::now();
      const auto s = reqs[d].post();
      f.t2 = nb::clock::now();
      if (s == nixl::status::in_progress) return f.busy = true;
      must(s, "post");
      record(f.iter, 0.0, nb::us_since(f.t1, f.t2), nb::us_since(f.t1, nb::clock::now()));
    }
    return false;
  };
  // --wait: when a pass over the requests (request::peek) found none ended, sleep on the agent's
  // event fd (no spin) until one does; drained before the pass, so that an end during it wakes
  // the next.
  const int fd = o.wait ? a.event_fd() : -1;
  auto phase = [&](int end) {
    std::size_t live = 0;
    for (std::size_t d = 0; d < depth; ++d) live += launch(d, end) ? 1 : 0;
    while (live > 0) {
      tgt.idle();
      bool ended = false;
      if (fd >= 0) a.drain_events();
      for (std::size_t d = 0; d < depth; ++d) {
        flight& f = fl[d];
        if (!f.busy) continue;
        // --wait: peek, which makes no progress (the progress thread does, and signals the fd)
        const auto s = fd >= 0 ? reqs[d].peek() : reqs[d].status();
        if (s == nixl::status::in_progress) continue;
        must(s, "post");
        record(f.iter, 0.0, nb::us_since(f.t1, f.t2), nb::us_since(f.t1, nb::clock::now()));
        ended = true;
        f.busy = false;
        if (!launch(d, end)) --live;
      }
      if (fd >= 0 && !ended && live > 0) {
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, 100);
      } else if (o.yield) {
        std::this_thread::yield();
      }
    }
  };
  phase(p.warmup);
  mark_start(p.warmup);
  phase(p.warmup + p.iters);
  out.end = nb::clock::now();
  out.prep.assign(out.prep.empty() ? 0 : 1, prep);
}

/// `--reregister_mem`: the thread's local blocks are registered before each request is made
/// and deregistered after it is released (nixlbench's flag); prep includes the registration.
template <class Timed>
void reregister_each(bench_agent& a, const options& o, const segment& local, target_side& tgt,
                     const nb::layout& lay, int t, const nb::point& p, const nixl::xfer_options& xo,
                     const nixl::xfer_dlist& l, const nixl::xfer_dlist& r, Timed&& timed) {
  nixl::reg_dlist reg(local.kind());
  for (std::size_t i = 0; i < p.batch; ++i)
    reg.push_back({local.at(lay.offset(t, i), p.block), ""});
  const nixl::backend_options bo{{o.backend}};
  for (int k = 0; k < p.warmup + p.iters; ++k) {
    timed(k, [&] {
      a.register_memory(reg, bo);
      return a.create_request(o.op(), l, r, tgt.agent(), xo);
    });
    a.deregister_memory(reg, bo);
  }
}

}  // namespace

nb::row run_point(bench_agent& a, const options& o, segment& local, target_side& tgt,
                  const nb::point& p, std::size_t idx, std::size_t npoints, progress_line& prog,
                  nb::host_buffer& scratch) {
  const nb::layout lay{p.block, p.block * o.stride_factor(), o.per_thread()};
  const std::uint32_t seed = static_cast<std::uint32_t>(idx + 1);
  const nixl::xfer_op op = o.op();
  if (o.check_consistency) {
    if (op == nixl::xfer_op::write)
      local.fill(seed);
    else
      tgt.fill(seed);
  }
  nixl::xfer_options xo;
  xo.backends = {o.backend};
  xo.skip_merge = o.skip_merge;
  const int threads = o.num_threads;
  const std::size_t slots = lay.per_thread / lay.stride;  // prepared mode: the whole range

  std::vector<thread_out> outs(static_cast<std::size_t>(threads));
  std::latch ready(threads);

  auto body = [&](int t) {
    auto& out = outs[static_cast<std::size_t>(t)];
    bool arrived = false;
    try {
      nixl::xfer_dlist l(local.kind()), r(tgt.kind());
      const std::size_t n = o.xfer_mode == "prepared" ? slots : p.batch;
      l.reserve(n);
      r.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        l.push_back(local.at(lay.offset(t, i), p.block));
        r.push_back(tgt.at(lay.offset(t, i), p.block));
      }
      out.prep.reserve(static_cast<std::size_t>(p.iters));
      out.post.reserve(static_cast<std::size_t>(p.iters));
      out.tx.reserve(static_cast<std::size_t>(p.iters));
      const int total = p.warmup + p.iters;
      auto record = [&](int k, double prep, double post, double tx) {
        if (k < p.warmup) return;
        out.prep.push_back(prep);
        out.post.push_back(post);
        out.tx.push_back(tx);
        if (t == 0) prog.update(idx, npoints, p, k - p.warmup + 1);
      };
      auto mark_start = [&](int k) {
        if (k == p.warmup) {
          arrived = true;
          ready.arrive_and_wait();
          out.start = nb::clock::now();
          out.thread_cpu_us = nb::cpu_us(RUSAGE_THREAD);
          if (t == 0) out.cpu_start_us = nb::cpu_us();
        }
      };
      if (o.xfer_mode == "repost" && o.pipeline_depth > 1) {
        repost_pipelined(a, o, local, tgt, lay, t, p, xo, out, mark_start, record);
      } else if (o.xfer_mode == "repost") {
        const auto t0 = nb::clock::now();
        auto req = a.create_request(op, l, r, tgt.agent(), xo);
        const double prep = nb::us_since(t0, nb::clock::now());
        out.descs = req.descriptor_count();
        for (int k = 0; k < total; ++k) {
          mark_start(k);
          const auto t1 = nb::clock::now();
          auto s = req.post();
          const auto t2 = nb::clock::now();
          must(wait(req, s, tgt, o), "post");
          record(k, k == p.warmup ? prep : 0.0, nb::us_since(t1, t2),
                 nb::us_since(t1, nb::clock::now()));
        }
        out.end = nb::clock::now();
        // nixlbench's prep is paid once per point: report it once, not averaged away.
        out.prep.assign(out.prep.empty() ? 0 : 1, prep);
      } else {
        // recreate: a request from the two lists per iteration; prepared: lists resolved once,
        // a request from indices per iteration. Either way the request is timed from making.
        auto timed = [&](int k, auto make) {
          mark_start(k);
          const auto t0 = nb::clock::now();
          auto req = make();
          const auto t1 = nb::clock::now();
          auto s = req.post();
          const auto t2 = nb::clock::now();
          must(wait(req, s, tgt, o), "post");
          const auto t3 = nb::clock::now();
          out.descs = req.descriptor_count();
          req.release();
          record(k, nb::us_since(t0, t1), nb::us_since(t1, t2), nb::us_since(t1, t3));
        };
        if (o.reregister_mem) {
          reregister_each(a, o, local, tgt, lay, t, p, xo, l, r, timed);
        } else if (o.xfer_mode == "recreate") {
          for (int k = 0; k < total; ++k)
            timed(k, [&] { return a.create_request(op, l, r, tgt.agent(), xo); });
        } else {
          auto pl = a.prepare_list(l, {{o.backend}});
          auto pr = a.prepare_list(tgt.agent(), r, {{o.backend}});
          std::vector<int> li(p.batch), ri(p.batch);
          for (int k = 0; k < total; ++k) {
            for (std::size_t j = 0; j < p.batch; ++j)
              li[j] = ri[j] = static_cast<int>((static_cast<std::size_t>(k) * p.batch + j) % slots);
            timed(k, [&] { return a.make_request(op, pl, li, pr, ri, xo); });
          }
        }
        out.end = nb::clock::now();
      }
      out.thread_cpu_us = nb::cpu_us(RUSAGE_THREAD) - out.thread_cpu_us;
    } catch (...) {
      out.err = std::current_exception();
      if (!arrived) ready.count_down();  // never leave the others waiting
    }
  };

  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();
  prog.clear();
  for (auto& out : outs)
    if (out.err) std::rethrow_exception(out.err);

  nb::row row;
  row.block = p.block;
  row.batch = p.batch;
  row.iters = p.iters;
  std::vector<double> prep, post, tx;
  auto first = outs[0].start, last = outs[0].end;
  for (auto& out : outs) {
    first = std::min(first, out.start);
    last = std::max(last, out.end);
    prep.insert(prep.end(), out.prep.begin(), out.prep.end());
    post.insert(post.end(), out.post.begin(), out.post.end());
    tx.insert(tx.end(), out.tx.begin(), out.tx.end());
  }
  const double wall = nb::us_since(first, last);
  row.cpu = (nb::cpu_us() - outs[0].cpu_start_us) / wall;
  double thread_cpu = 0;
  for (const auto& out : outs) thread_cpu += out.thread_cpu_us;
  row.thread_cpu = thread_cpu / wall;
  const double bytes = static_cast<double>(p.block * p.batch) * p.iters * threads;
  row.gbps = bytes / wall / 1e3;
  row.avg_lat = wall / (static_cast<double>(p.iters) * static_cast<double>(p.batch));
  row.prep = nb::summarize(prep);
  row.post = nb::summarize(post);
  row.tx = nb::summarize(tx);
  row.descs = outs[0].descs;

  if (o.check_consistency) {
    const std::size_t count =
        o.xfer_mode == "prepared"
            ? std::min(slots, static_cast<std::size_t>(p.warmup + p.iters) * p.batch)
            : p.batch * pipelined_blocks(o);
    auto bad = op == nixl::xfer_op::write ? tgt.verify(lay, count, threads, seed)
                                          : local.verify(lay, count, threads, seed);
    if (bad)
      fail(
          fmt::format("data check failed at block {} batch {}: byte at offset {} of the {} "
                      "side is wrong",
                      p.block, p.batch, *bad, op == nixl::xfer_op::write ? "target" : "initiator"));
    row.checked = true;
  }

  // Baseline, after the run so that both do not compete for the cores.
  nb::point bp = p;
  if (o.baseline == "memcpy" && local.kind() == nixl::mem_kind::dram) {
    auto b =
        memcpy_baseline(local.host(), scratch.data(), lay, p.batch, bp, op == nixl::xfer_op::read,
                        o.xfer_mode == "prepared" ? slots
                        : pipelined_blocks(o) > 1 ? p.batch * pipelined_blocks(o)
                                                  : 0);
    row.base_gbps = b.gbps;
    row.base_us = b.us;
  } else if (o.baseline == "fio") {
    if (auto* lt = dynamic_cast<local_target*>(&tgt);
        lt && lt->seg().kind() == nixl::mem_kind::file) {
      auto b = fio_baseline(lt->seg().path(), bp, op == nixl::xfer_op::read, o.fio_runtime);
      row.base_gbps = b.gbps;
      row.base_us = b.us;
    }
  }
#if defined(NIXL_BENCH_GDS)
  else if (o.baseline == "cufile") {
    if (auto* lt = dynamic_cast<local_target*>(&tgt);
        lt && lt->seg().kind() == nixl::mem_kind::file) {
      auto b = cufile_baseline(lt->seg().path(), local.base(), local.kind(), o.initiator_gpu, lay,
                               bp, op == nixl::xfer_op::read);
      row.base_gbps = b.gbps;
      row.base_us = b.us;
    }
  }
#endif
#if defined(NIXL_BENCH_CUDA)
  else if (o.baseline == "cuda") {
    auto b = cuda_baseline(local.kind(), tgt.kind(), lay, bp, op == nixl::xfer_op::read,
                           o.initiator_gpu, o.target_gpu);
    row.base_gbps = b.gbps;
    row.base_us = b.us;
  }
#endif
  return row;
}

}  // namespace nixl_bench
