// Unit tests of nixl-bench's reusable pieces: the data pattern, the sweep, the layout, the
// statistics and the CSV/JSON output.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nixl_test/catch.hpp>

#include "bench_common.hpp"
#include "compare_nixl.hpp"
#include "report.hpp"

namespace nb = nixl_bench;

TEST_CASE("pattern: a copy to the same offset passes, a shifted or stale one fails") {
  std::vector<std::uint8_t> a(8192), b(8192);
  nb::fill_pattern(a.data(), 0, a.size(), 7);
  CHECK_FALSE(nb::check_pattern(a.data(), 0, a.size(), 7).has_value());
  // stale data from another point (seed)
  auto bad = nb::check_pattern(a.data(), 0, a.size(), 8);
  REQUIRE(bad.has_value());
  CHECK(*bad < 8);
  // a block written one block too far
  nb::fill_pattern(b.data() + 4096, 0, 4096, 7);
  CHECK(nb::check_pattern(b.data() + 4096, 4096, 4096, 7).has_value());
  // one wrong byte in the middle
  a[5000] ^= 1;
  CHECK(nb::check_pattern(a.data(), 0, a.size(), 7) == std::optional<std::size_t>(5000));
}

TEST_CASE("sweep: doubling blocks and batches, fewer iterations above 1 MiB") {
  auto pts = nb::sweep_points(4096, 4u << 20, 1, 4, 1000, 100, 16);
  REQUIRE(pts.size() == 11 * 3);
  CHECK(pts.front().block == 4096);
  CHECK(pts.front().batch == 1);
  CHECK(pts[1].batch == 2);
  CHECK(pts[2].batch == 4);
  CHECK(pts.back().block == (4u << 20));
  CHECK(pts.back().iters == 1000 / 16);
  CHECK(pts.back().warmup == 100 / 16);
  for (const auto& p : pts)
    if (p.block <= (1u << 20)) CHECK(p.iters == 1000);
  CHECK(nb::sweep_points(1, 1, 1, 1, 5, 0, 16).size() == 1);
}

TEST_CASE("layout: threads get their own slice; scattered blocks leave gaps") {
  nb::layout l{4096, 8192, 1 << 20};
  CHECK(l.offset(0, 0) == 0);
  CHECK(l.offset(0, 3) == 3 * 8192);
  CHECK(l.offset(2, 1) == 2 * (1 << 20) + 8192);
}

TEST_CASE("summary: average and 99th percentile") {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  auto s = nb::summarize(v);
  CHECK(s.avg == Approx(50.5));
  CHECK(s.p99 == 99);
  std::vector<double> one{3.5};
  CHECK(nb::summarize(one).p99 == 3.5);
  std::vector<double> none;
  CHECK(nb::summarize(none).avg == 0);
}

TEST_CASE("sizes print in binary units") {
  CHECK(nb::size_str(4096) == "4K");
  CHECK(nb::size_str(64u << 20) == "64M");
  CHECK(nb::size_str(1000) == "1000");
}

TEST_CASE("CSV and JSON carry every point and the ratio") {
  nb::run_info info{"UCX", "WRITE", "DRAM", "DRAM", "repost", "memcpy", 2, 1, false, "cmd"};
  nb::row r;
  r.block = 4096;
  r.batch = 2;
  r.iters = 10;
  r.gbps = 5;
  r.base_gbps = 10;
  r.checked = true;
  std::vector<nb::row> rows{r, r};
  rows[1].base_gbps = 0;
  const std::string path = "/tmp/nixl-bench-test-" + std::to_string(::getpid()) + ".csv";
  nb::write_csv(path, info, rows);
  std::ifstream f(path);
  std::string header, l1, l2;
  std::getline(f, header);
  std::getline(f, l1);
  std::getline(f, l2);
  std::remove(path.c_str());
  CHECK(header.rfind("backend,op,", 0) == 0);
  CHECK(l1.find(",0.5000,1") != std::string::npos);  // ratio, checked
  CHECK(l2.find(",,1") != std::string::npos);        // no baseline: empty ratio
  auto j = nb::to_json(info, rows);
  REQUIRE(j["points"].size() == 2);
  CHECK(j["points"][0]["ratio"].get<double>() == Approx(0.5));
  CHECK_FALSE(j["points"][1].contains("ratio"));
  CHECK(j["processes"] == 2);
}

TEST_CASE("compare_nixl: nixlbench's result rows are read, the rest of its output skipped") {
  const std::string out =
      "Num iter (--num_iter=N)                                     : 1008\n"
      "Block Size (B)      Batch Size     B/W (GB/Sec)   Avg Lat. (us)  Avg Prep (us)  P99 Prep "
      "(us)  Avg Post (us)  P99 Post (us)  Avg Tx (us)    P99 Tx (us)\n"
      "-----------------------------------------------------------------\n"
      "4096                1              1.079          3.8            38.0           38.0     "
      "      2.5            4.0            1.7            3.0\n"
      "[vm:1:0] UCX WARN 4096 something 1 2 3 4 5 6 7 8\n"
      "8192                2              0.5            16.4           55.0           55.0     "
      "      44.7           12.0           683.1          36021.0\n";
  const auto rows = nb::parse_nixlbench(out);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].block == 4096);
  CHECK(rows[0].batch == 1);
  CHECK(rows[0].gbps == Approx(1.079));
  CHECK(rows[0].avg_lat == Approx(3.8));
  CHECK(rows[1].batch == 2);
  CHECK(rows[1].tx_p99 == Approx(36021.0));
  // best of two runs: highest bandwidth, lowest latency, per point
  auto second = rows;
  second[0].gbps = 2.0;
  second[0].avg_lat = 5.0;
  const auto best = nb::best_of({rows, second});
  REQUIRE(best.size() == 2);
  CHECK(best[0].gbps == Approx(2.0));
  CHECK(best[0].avg_lat == Approx(3.8));
  CHECK(nb::parse_nixlbench("no table here\n").empty());
}
