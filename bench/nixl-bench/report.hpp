#pragma once
/// nixl-bench output: nixlbench's table (plus baseline columns), CSV, JSON and a gnuplot PNG.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"

namespace nixl_bench {

/// What one sweep point measured.
struct row {
  std::size_t block = 0;
  std::size_t batch = 0;
  int iters = 0;
  double gbps = 0;         ///< block * batch * iters * threads / wall time, 10^9 B/s
  double avg_lat = 0;      ///< nixlbench's "Avg Lat.": wall time / (iters * batch), us
  summary prep, post, tx;  ///< per request, us
  std::size_t descs = 0;   ///< descriptors the backend saw per request (after merging)
  double base_gbps = 0;    ///< baseline in the same run (0: none)
  double base_us = 0;      ///< baseline time per request (batch of blocks), us
  bool checked = false;    ///< data verified
  double cpu = -1;         ///< the process's CPU time / wall time of the timed part (1: a core)
  double thread_cpu = -1;  ///< the same for the benchmark's threads alone (posting, waiting)
};

struct run_info {
  std::string backend, op, initiator_seg, target_seg, mode, baseline;
  int processes = 1, threads = 1;
  bool scatter = false;
  std::string command;
};

inline std::string ratio_str(const row& r) {
  return r.base_gbps > 0 ? fmt::format("{:.2f}", r.gbps / r.base_gbps) : std::string("-");
}

inline void print_header(std::FILE* f, const run_info& info) {
  fmt::print(f, "nixl-bench: {} {} {} -> {}, {} process{}, {} thread{}, mode {}{}, baseline {}\n",
             info.backend, info.op, info.initiator_seg, info.target_seg, info.processes,
             info.processes == 1 ? "" : "es", info.threads, info.threads == 1 ? "" : "s", info.mode,
             info.scatter ? " (scattered)" : "", info.baseline);
  fmt::print(
      f,
      "{:>14} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6} {:>5} "
      "{:>7} {}\n",
      "Block Size (B)", "Batch", "B/W (GB/s)", "Avg Lat.", "Avg Prep", "P99 Prep", "Avg Post",
      "P99 Post", "Avg Tx", "P99 Tx", "Descs", "Base GB/s", "Base Tx", "Ratio", "Check", "CPU",
      "T.CPU");
  fmt::print(
      f,
      "{:>14} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6} {:>5} "
      "{:>7} {}\n",
      "", "", "", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "", "", "(us)", "", "",
      "(cores)", "(cores)");
  std::fflush(f);
}

inline void print_row(std::FILE* f, const row& r) {
  fmt::print(f,
             "{:>14} {:>6} {:>10.3f} {:>9.3f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} "
             "{:>9.2f} {:>6} {:>9} {:>9} {:>6} {:>5} {:>7} {}\n",
             r.block, r.batch, r.gbps, r.avg_lat, r.prep.avg, r.prep.p99, r.post.avg, r.post.p99,
             r.tx.avg, r.tx.p99, r.descs,
             r.base_gbps > 0 ? fmt::format("{:.3f}", r.base_gbps) : std::string("-"),
             r.base_gbps > 0 ? fmt::format("{:.2f}", r.base_us) : std::string("-"), ratio_str(r),
             r.checked ? "ok" : "-", r.cpu >= 0 ? fmt::format("{:.3f}", r.cpu) : std::string("-"),
             r.thread_cpu >= 0 ? fmt::format("{:.3f}", r.thread_cpu) : std::string("-"));
  std::fflush(f);
}

inline void write_csv(std::ostream& o, const run_info& info, const std::vector<row>& rows) {
  o << "backend,op,initiator_seg,target_seg,processes,threads,mode,scatter,block_size,batch_size,"
       "iterations,gbps,avg_lat_us,avg_prep_us,p99_prep_us,avg_post_us,p99_post_us,avg_tx_us,"
       "p99_tx_us,descs,baseline,baseline_gbps,baseline_tx_us,ratio,checked,cpu_cores,"
       "thread_cpu_cores\n";
  for (const auto& r : rows)
    o << fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},"
        "{},{},{:.4f},{:.3f},{},{},{},{}\n",
        info.backend, info.op, info.initiator_seg, info.target_seg, info.processes, info.threads,
        info.mode, info.scatter ? 1 : 0, r.block, r.batch, r.iters, r.gbps, r.avg_lat, r.prep.avg,
        r.prep.p99, r.post.avg, r.post.p99, r.tx.avg, r.tx.p99, r.descs, info.baseline, r.base_gbps,
        r.base_us, r.base_gbps > 0 ? fmt::format("{:.4f}", r.gbps / r.base_gbps) : "",
        r.checked ? 1 : 0, r.cpu >= 0 ? fmt::format("{:.4f}", r.cpu) : "",
        r.thread_cpu >= 0 ? fmt::format("{:.4f}", r.thread_cpu) : "");
}

inline void write_csv(const std::string& path, const run_info& info, const std::vector<row>& rows) {
  std::ofstream o(path);
  write_csv(o, info, rows);
  if (!o) throw std::runtime_error("cannot write " + path);
}

inline nlohmann::json to_json(const run_info& info, const std::vector<row>& rows) {
  nlohmann::json j = {{"backend", info.backend},
                      {"op", info.op},
                      {"initiator_seg_type", info.initiator_seg},
                      {"target_seg_type", info.target_seg},
                      {"processes", info.processes},
                      {"threads", info.threads},
                      {"mode", info.mode},
                      {"scatter", info.scatter},
                      {"baseline", info.baseline},
                      {"command", info.command}};
  auto& pts = j["points"] = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json p;
    p["block_size"] = r.block;
    p["batch_size"] = r.batch;
    p["iterations"] = r.iters;
    p["gbps"] = r.gbps;
    p["avg_lat_us"] = r.avg_lat;
    p["prep_us"] = {{"avg", r.prep.avg}, {"p99", r.prep.p99}};
    p["post_us"] = {{"avg", r.post.avg}, {"p99", r.post.p99}};
    p["tx_us"] = {{"avg", r.tx.avg}, {"p99", r.tx.p99}};
    p["descs"] = r.descs;
    if (r.base_gbps > 0) {
      p["baseline_gbps"] = r.base_gbps;
      p["baseline_tx_us"] = r.base_us;
      p["ratio"] = r.gbps / r.base_gbps;
    }
    p["checked"] = r.checked;
    if (r.cpu >= 0) p["cpu_cores"] = r.cpu;
    if (r.thread_cpu >= 0) p["thread_cpu_cores"] = r.thread_cpu;
    pts.push_back(std::move(p));
  }
  return j;
}

/// Bandwidth (left axis) and per-request latency (right axis) against block size, one line per
/// batch size, with the baseline dashed. Needs gnuplot; returns false (with a message) without.
inline bool write_plot(const std::string& png, const run_info& info, const std::vector<row>& rows) {
  char dir[] = "/tmp/nixl-bench-plot-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return false;
  const std::string data = std::string(dir) + "/data", script = std::string(dir) + "/plot.gp";
  std::vector<std::size_t> batches;
  for (const auto& r : rows)
    if (std::find(batches.begin(), batches.end(), r.batch) == batches.end())
      batches.push_back(r.batch);
  {
    std::ofstream d(data);
    for (std::size_t b : batches) {
      d << "# batch " << b << "\n";
      for (const auto& r : rows)
        if (r.batch == b)
          d << fmt::format("{} {:.6f} {:.6f} {:.3f} {:.3f}\n", r.block, r.gbps, r.base_gbps,
                           r.tx.avg, r.base_us);
      d << "\n\n";
    }
  }
  {
    std::ofstream s(script);
    s << "set terminal pngcairo size 1100,650 noenhanced\n";
    s << "set output '" << png << "'\n";
    s << fmt::format("set title 'nixl-bench {} {} {} -> {}, {} process(es), mode {}{}'\n",
                     info.backend, info.op, info.initiator_seg, info.target_seg, info.processes,
                     info.mode, info.scatter ? " scattered" : "");
    s << "set logscale x 2\nset logscale y2 10\nset grid\n";
    s << "set xlabel 'block size (bytes)'\nset ylabel 'bandwidth (GB/s)'\n";
    s << "set y2label 'time per request (us)'\nset ytics nomirror\nset y2tics\n";
    s << "set key outside right top\nset format x '%.0b%B'\n";
    s << "plot ";
    for (std::size_t i = 0; i < batches.size(); ++i) {
      if (i) s << ", ";
      s << fmt::format(
          "'{0}' index {1} using 1:2 with linespoints lw 2 title 'GB/s batch {2}', "
          "'{0}' index {1} using 1:4 axes x1y2 with linespoints dt 3 title 'us/request batch {2}'",
          data, i, batches[i]);
      bool has_base = false;
      for (const auto& r : rows)
        if (r.batch == batches[i] && r.base_gbps > 0) has_base = true;
      if (has_base)
        s << fmt::format(", '{0}' index {1} using 1:3 with lines dt 2 title '{2} GB/s batch {3}'",
                         data, i, info.baseline, batches[i]);
    }
    s << "\n";
  }
  const int rc = std::system(fmt::format("gnuplot '{}' 2>&1", script).c_str());
  std::remove(data.c_str());
  std::remove(script.c_str());
  ::rmdir(dir);
  if (rc != 0) {
    fmt::print(stderr, "nixl-bench: gnuplot failed (exit {}); is it installed (gnuplot-nox)?\n",
               rc);
    return false;
  }
  return true;
}

}  // namespace nixl_bench
