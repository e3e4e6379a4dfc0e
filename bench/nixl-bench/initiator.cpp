// The initiator: its agent and segment, the target (in this process or another), the sweep and
// its reports, and --compare_nixl (NIXL's nixlbench over the same sweep, in the same run).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "compare_nixl.hpp"
#if defined(NIXL_BENCH_DEVICE)
#include "device_mode.hpp"
#endif
#include "report.hpp"
#include "roles.hpp"
#include "sweep.hpp"
#include "target.hpp"

namespace nixl_bench {
namespace {

/// nixlbench's arguments for the sweep `o` describes (its flag names are ours).
std::vector<std::string> nixlbench_args(const options& o) {
  std::vector<std::string> v = {
      "--op_type=" + o.op_type,
      "--initiator_seg_type=" + o.initiator_seg_type,
      "--target_seg_type=" + o.target_seg_type,
      fmt::format("--start_block_size={}", o.start_block_size),
      fmt::format("--max_block_size={}", o.max_block_size),
      fmt::format("--start_batch_size={}", o.start_batch_size),
      fmt::format("--max_batch_size={}", o.max_batch_size),
      fmt::format("--num_iter={}", o.num_iter),
      fmt::format("--warmup_iter={}", o.warmup_iter),
      fmt::format("--large_blk_iter_ftr={}", o.large_blk_iter_ftr),
      fmt::format("--num_threads={}", o.num_threads),
      fmt::format("--pipeline_depth={}", o.pipeline_depth),
      fmt::format("--total_buffer_size={}", o.buffer_size()),
      "--enable_pt=false",  // NIXL's fastest setting on one host; override with --compare_nixl_args
  };
  if (o.check_consistency) v.push_back("--check_consistency");
  if (o.xfer_mode == "recreate") v.push_back("--recreate_xfer");
  if (o.xfer_mode == "prepared") v.push_back("--prepared_xfer");
  if (o.reregister_mem) v.push_back("--reregister_mem");
  v.insert(v.end(), o.compare_nixl_args.begin(), o.compare_nixl_args.end());
  return v;
}

/// One nixlbench run (round `round`); its rows, empty when it failed.
std::vector<nb::nixl_row> nixlbench_run(const options& o, int round) {
  const auto out =
      nb::run_nixlbench(o.compare_nixl, nixlbench_args(o), o.compare_nixl_err_mode, round);
  auto rows = nb::parse_nixlbench(out);
  if (rows.empty() && !out.empty())
    fmt::print(stderr, "nixl-bench: no result rows in NIXL's output:\n{}\n", out);
  return rows;
}

}  // namespace

int run_initiator(const options& o, std::optional<pid_t> child, int port_fd) {
#if defined(NIXL_BENCH_DEVICE)
  // The GPUs first: a clear message without one, and their contexts before any backend.
  std::optional<device::runner> gpu;
  if (o.use_device_api) {
    if (o.processes == 1 && o.target_gpu != o.initiator_gpu) require_gpu(o.target_gpu);
    require_gpu(o.initiator_gpu);
    gpu.emplace(o.initiator_gpu, o.target_gpu);
  }
#endif
  nixl::agent_config cfg;
  cfg.enable_prog_thread = o.enable_pt;
  if (o.wait_spin_us >= 0) cfg.wait_spin = std::chrono::microseconds(o.wait_spin_us);
  if (o.host_threads() > 1) cfg.sync = nixl::thread_sync::rw;
  bench_agent a(initiator_name, cfg);
  a.create_backend(o.backend, backend_params(o));
  segment local(o.initiator_kind(), o.buffer_size(), o, o.initiator_gpu, "initiator",
                o.initiator_kind() == nixl::mem_kind::dram ? ucx_allocator(a, o) : nullptr);
  if (!o.reregister_mem) local.register_with(a, {{o.backend}});

  // With etcd the exchange lives as long as the run: its lease carries our keys, and the target
  // drops us when they go.
  std::optional<nixl::metadata::exchange> central;
  std::unique_ptr<target_side> tgt;
  if (o.processes == 1) {
    tgt = std::make_unique<local_target>(a, o, o.buffer_size());
  } else {
    std::uint16_t port = o.port;
    if (port_fd >= 0) {  // the forked target writes its listener port
      std::string s;
      char c;
      while (::read(port_fd, &c, 1) == 1 && c != '\n') s.push_back(c);
      ::close(port_fd);
      if (s.empty()) fail("the target process did not start (see its messages above)");
      port = static_cast<std::uint16_t>(std::stoul(s));
    }
    if (!o.etcd_endpoints.empty()) {
      nixl::metadata::config mc;
      mc.etcd_endpoints = o.etcd_endpoints;
      mc.etcd_watch_timeout = std::chrono::minutes(1);  // the wait for the target's key
      central.emplace(a, mc);
      central->send_local_metadata().get();
      central->fetch_remote_metadata(target_name).get();
    } else {
      if (port == 0) fail("--role initiator needs the target's --port");
      const auto where_peer = nixl::metadata::target::peer(o.peer_ip, port);
      {
        nixl::metadata::config inline_only;  // no listener, no etcd: runs on this thread
        inline_only.read_env = false;
        if (const char* k = std::getenv("NIXL_METADATA_SECRET")) inline_only.metadata_secret = k;
        nixl::metadata::exchange x{a, inline_only};
        x.send_local_metadata(where_peer).get();
        x.fetch_remote_metadata(target_name, where_peer).get();
      }
    }
    mailbox box(a, target_name);
    auto m = box.next(60s);
    if (!m || m->rfind("where:", 0) != 0) fail("the target did not say where its buffer is");
    auto where = nixl::decode_xfer_list(std::string_view(*m).substr(6));
    if (where.size() != 1 || where[0].len < o.buffer_size())
      fail(
          fmt::format("the target's buffer holds {} bytes, this run needs {}; give both the "
                      "same size options",
                      where.empty() ? 0 : where[0].len, o.buffer_size()));
    if (where.kind() != o.target_kind())
      fail(fmt::format("the target's segment is {}, --target_seg_type says {}", where.kind(),
                       o.target_seg_type));
    tgt = std::make_unique<remote_target>(a, std::move(where), child.value_or(-1));
  }

  // NIXL's runs alternate with ours: one before the sweep, the rest after it.
  std::vector<std::vector<nb::nixl_row>> nixl_runs;
  if (!o.compare_nixl.empty() && o.compare_nixl_runs > 0) nixl_runs.push_back(nixlbench_run(o, 0));

  auto points = nb::sweep_points(o.start_block_size, o.max_block_size, o.start_batch_size,
                                 o.max_batch_size, o.num_iter, o.warmup_iter, o.large_blk_iter_ftr);
  // With --use_device_api the mode names the kernel's level and the threads are its block size.
  const std::string mode = !o.use_device_api       ? o.xfer_mode
                           : o.device_warp_level() ? "device-warp"
                                                   : "device-thread";
  nb::run_info info{o.backend,  o.op_type,   o.initiator_seg_type, o.target_seg_type, mode,
                    o.baseline, o.processes, o.num_threads,        o.scatter,         o.command};
  const bool table = o.output_format == "table";
  if (table) nb::print_header(stdout, info);
  nb::host_buffer scratch(o.baseline == "memcpy" ? o.per_thread() : 0);
  progress_line prog(o.progress);
  auto fits = [&](const nb::point& p) {
    return p.block * p.batch * o.stride_factor() <= o.per_thread();
  };
  auto measure = [&](const options& mo, const nb::point& p, std::size_t i) {
#if defined(NIXL_BENCH_DEVICE)
    if (gpu) return run_device_point(a, mo, local, *tgt, *gpu, p, i, points.size(), prog);
#endif
    return run_point(a, mo, local, *tgt, p, i, points.size(), prog, scratch);
  };
  // --warmup_ms: the first point that fits, run and thrown away until the time is up (a count
  // of warm-up iterations alone cannot say how long a process has been warming up); requests
  // only, without the baseline and the data check
  if (o.warmup_ms > 0) {
    const auto first = std::find_if(points.begin(), points.end(), fits);
    if (first != points.end()) {
      options wo = o;
      wo.baseline = "none";
      wo.check_consistency = false;
      nb::point w = *first;
      w.iters = 1;
      w.warmup = std::max(w.warmup, 10);
      const auto until = nb::clock::now() + std::chrono::milliseconds(o.warmup_ms);
      while (nb::clock::now() < until) (void)measure(wo, w, 0);
    }
  }
  std::vector<nb::row> rows;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    if (!fits(p)) {
      fmt::print(stderr,
                 "nixl-bench: skipping block {} batch {}: needs {} bytes per thread, "
                 "--total_buffer_size gives {}\n",
                 p.block, p.batch, p.block * p.batch * o.stride_factor(), o.per_thread());
      continue;
    }
    rows.push_back(measure(o, p, i));
    if (table) nb::print_row(stdout, rows.back());
  }
  tgt->finish();
  tgt.reset();
  for (int k = 1; k < o.compare_nixl_runs && !o.compare_nixl.empty(); ++k)
    nixl_runs.push_back(nixlbench_run(o, k));
  if (!nixl_runs.empty())
    nb::print_compare(stdout,
                      fmt::format("{}, UCX error mode {}, best of {} runs", o.compare_nixl,
                                  o.compare_nixl_err_mode, nixl_runs.size()),
                      rows, nb::best_of(nixl_runs));

  if (o.output_format == "csv") {
    // through stdout itself: a fresh open of /dev/stdout would truncate a redirected file,
    // and with it whatever UCX or the logger wrote there before
    std::fflush(stdout);
    std::cout.flush();
    nb::write_csv(std::cout, info, rows);
    std::cout.flush();
  } else if (o.output_format == "json") {
    fmt::print("{}\n", nb::to_json(info, rows).dump(2));
  }
  if (!o.csv.empty()) nb::write_csv(o.csv, info, rows);
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << nb::to_json(info, rows).dump(2) << "\n";
  }
  if (!o.plot.empty() && nb::write_plot(o.plot, info, rows) && table)
    fmt::print("plot: {}\n", o.plot);
  return 0;
}

}  // namespace nixl_bench
