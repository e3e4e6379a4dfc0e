#pragma once
/// `--compare_nixl PATH`: runs NIXL's own nixlbench (a packed folder with `run_pair.sh`, such as
/// ../shared/peers/nixl-1.4) over the same sweep in the same run, reads its table and prints it
/// next to nixl-bench's rows with ratios.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "report.hpp"

namespace nixl_bench {

/// One row of nixlbench's result table.
struct nixl_row {
  std::size_t block = 0, batch = 0;
  double gbps = 0, avg_lat = 0, prep_avg = 0, prep_p99 = 0, post_avg = 0, post_p99 = 0, tx_avg = 0,
         tx_p99 = 0;
};

/// The result rows of nixlbench's output: lines of exactly ten numbers (block, batch, B/W, avg
/// latency, avg/p99 prep, avg/p99 post, avg/p99 tx). Everything else (its banner, the
/// parameter list, UCX warnings) is skipped.
inline std::vector<nixl_row> parse_nixlbench(const std::string& out) {
  std::vector<nixl_row> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<double> v;
    std::string tok;
    bool numeric = true;
    while (ls >> tok) {
      char* end = nullptr;
      const double d = std::strtod(tok.c_str(), &end);
      if (end == tok.c_str() || *end != '\0') {
        numeric = false;
        break;
      }
      v.push_back(d);
    }
    if (!numeric || v.size() != 10 || v[0] < 1 || v[1] < 1) continue;
    rows.push_back({static_cast<std::size_t>(v[0]), static_cast<std::size_t>(v[1]), v[2], v[3],
                    v[4], v[5], v[6], v[7], v[8], v[9]});
  }
  return rows;
}

/// Per point, the best of several nixlbench runs: highest bandwidth, lowest times. Comparing
/// against NIXL's best run keeps the ratio on the safe side on a noisy machine.
inline std::vector<nixl_row> best_of(const std::vector<std::vector<nixl_row>>& runs) {
  std::vector<nixl_row> best;
  for (const auto& run : runs)
    for (const auto& r : run) {
      auto it = std::find_if(best.begin(), best.end(), [&](const nixl_row& b) {
        return b.block == r.block && b.batch == r.batch;
      });
      if (it == best.end()) {
        best.push_back(r);
        continue;
      }
      it->gbps = std::max(it->gbps, r.gbps);
      it->avg_lat = std::min(it->avg_lat, r.avg_lat);
      it->tx_avg = std::min(it->tx_avg, r.tx_avg);
      it->tx_p99 = std::min(it->tx_p99, r.tx_p99);
      it->post_avg = std::min(it->post_avg, r.post_avg);
      it->prep_avg = std::min(it->prep_avg, r.prep_avg);
    }
  return best;
}

/// A TCP port of 127.0.0.1 that was free a moment ago (for nixlbench's ASIO runtime).
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  ::close(fd);
  return port;
}

/// Runs `PATH/run_pair.sh` (two nixlbench processes over loopback) with `args`; returns the
/// initiator's output, or an empty string (with a message) when it failed.
inline std::string run_nixlbench(const std::string& path, const std::vector<std::string>& args,
                                 const std::string& err_mode, int round) {
  const std::string out_dir = fmt::format("/tmp/nixl-bench-compare-{}", ::getpid());
  std::string cmd =
      fmt::format("PORT={} NIXLBENCH_UCX_ERR_MODE='{}' GRACE=5 '{}/run_pair.sh' r{} '{}'",
                  free_loopback_port(), err_mode, path, round, out_dir);
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>/dev/null";
  std::FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return {};
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int rc = ::pclose(f);
  std::error_code ignored;  // a leftover log folder in /tmp is not worth failing the run for
  std::filesystem::remove_all(out_dir, ignored);
  if (rc != 0) {
    fmt::print(stderr, "nixl-bench: NIXL's nixlbench failed (exit {}): {}\n", rc, cmd);
    return {};
  }
  return out;
}

/// Both sweeps side by side: bandwidth and nixlbench's "Avg Lat." (wall time / (iterations x
/// batch): the one time both tools define alike; nixlbench's Tx columns time a different span),
/// NIXL's best of its runs, the ratios (GB/s ours / NIXL's; latency ours / NIXL's), and each
/// tool's average post time per request (both time the post call alone).
inline void print_compare(std::FILE* f, const std::string& what, const std::vector<row>& ours,
                          const std::vector<nixl_row>& theirs) {
  fmt::print(f, "\nNIXL nixlbench, same sweep, same run ({}):\n", what);
  fmt::print(f, "{:>14} {:>6} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>11} {:>11}\n",
             "Block Size (B)", "Batch", "ours GB/s", "NIXL GB/s", "ratio", "ours lat", "NIXL lat",
             "ratio", "ours post", "NIXL post");
  for (const auto& r : ours) {
    auto it = std::find_if(theirs.begin(), theirs.end(), [&](const nixl_row& n) {
      return n.block == r.block && n.batch == r.batch;
    });
    if (it == theirs.end()) {
      fmt::print(f, "{:>14} {:>6} {:>10.3f} {:>10} {:>7} {:>10.2f} {:>10} {:>7} {:>11.2f} {:>11}\n",
                 r.block, r.batch, r.gbps, "-", "-", r.avg_lat, "-", "-", r.post.avg, "-");
      continue;
    }
    fmt::print(f,
               "{:>14} {:>6} {:>10.3f} {:>10.3f} {:>7.2f} {:>10.2f} {:>10.2f} {:>7.2f} {:>11.2f} "
               "{:>11.2f}\n",
               r.block, r.batch, r.gbps, it->gbps, it->gbps > 0 ? r.gbps / it->gbps : 0.0,
               r.avg_lat, it->avg_lat, it->avg_lat > 0 ? r.avg_lat / it->avg_lat : 0.0, r.post.avg,
               it->post_avg);
  }
  std::fflush(f);
}

}  // namespace nixl_bench
