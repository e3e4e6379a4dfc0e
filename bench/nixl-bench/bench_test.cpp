// Unit tests of nixl-bench's reusable pieces: the data pattern, the sweep, the layout, the
// statistics, the CSV/JSON output and the checks of the command line.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nixl_test/catch.hpp>

#include "bench_common.hpp"
#include "compare_nixl.hpp"
#include "options.hpp"
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

namespace {

/// The options a command line gives after validate(), or the message that refuses it (from the
/// parser or from validate()).
struct checked {
  nb::options o;
  std::string error;
};
checked check_args(const std::string& args) {
  checked c;
  CLI::App app;
  nb::add_options(app, c.o);
  try {
    app.parse(args, false);
    nb::validate(c.o);
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

constexpr const char* vram = " --initiator_seg_type VRAM --target_seg_type VRAM";

}  // namespace

TEST_CASE("--use_device_api: WRITE, VRAM -> VRAM, UCX or CUDA, a block size with a level") {
  const std::string dev = std::string("--use_device_api") + vram;
  SECTION("good combinations parse") {
    for (const char* extra : {"", " --backend CUDA", " --num_threads 32", " --num_threads 64",
                              " --num_threads 1024 --backend CUDA --processes 1",
                              " --baseline none", " --baseline cuda", " --scatter"}) {
      INFO(extra);
      const auto c = check_args(dev + extra);
      if (!nb::device_api_built) {
        CHECK(c.error.find("built without it") != std::string::npos);
        continue;
      }
      CHECK(c.error.empty());
      CHECK(c.o.host_threads() == 1);  // the kernel's threads are not posting threads
      CHECK(c.o.buffer_size() == c.o.per_thread());
    }
    if (nb::device_api_built) {
      auto c = check_args(dev);
      CHECK(c.o.baseline == "kernel");  // auto: the copy kernel of the same shape
      CHECK(c.o.processes == 2);
      CHECK_FALSE(c.o.device_warp_level());
      CHECK(nb::backend_params(c.o).count("num_threads") == 0);
      c = check_args(dev + " --num_threads 256 --max_block_size 1M --max_batch_size 4");
      CHECK(c.o.device_warp_level());
      CHECK(c.o.buffer_size() == (4u << 20));  // not x 256
      CHECK(nb::backend_params(c.o).count("num_threads") == 0);
      CHECK(check_args(dev + " --num_threads 32").o.device_warp_level() == false);
    }
  }
  SECTION("bad combinations are refused with the flag to change") {
    struct bad {
      std::string args, says;
    };
    for (const bad& b : std::vector<bad>{
             {dev + " --op_type READ", "--op_type READ"},
             {"--use_device_api --target_seg_type VRAM", "--initiator_seg_type VRAM"},
             {"--use_device_api --initiator_seg_type VRAM", "--target_seg_type VRAM"},
             {dev + " --num_threads 48", "--num_threads 48"},
             {dev + " --num_threads 100", "multiple of 32"},
             {dev + " --num_threads 2048", "--num_threads"},  // the parser's range
             {dev + " --backend POSIX", "--backend POSIX"},
             {"--use_device_api --backend POSIX --target_seg_type FILE", "--backend POSIX"},
             {dev + " --backend LIBFABRIC", "--backend LIBFABRIC"},
             {dev + " --backend GDS", "--backend GDS"},
             {"--use_device_api --backend OBJ", "--backend OBJ"},
             {dev + " --prepared_xfer", "--prepared_xfer"},
             {dev + " --xfer_mode recreate", "--xfer_mode"},
             {dev + " --reregister_mem", "--reregister_mem"},
             {dev + " --pipeline_depth 4", "--pipeline_depth"},
             {dev + " --baseline memcpy", "--baseline memcpy"},
         }) {
      INFO(b.args);
      const auto c = check_args(b.args);
      REQUIRE_FALSE(c.error.empty());
      CHECK(c.error.find(b.says) != std::string::npos);
      if (b.says != "--num_threads") CHECK(c.error.find("--use_device_api") != std::string::npos);
    }
  }
  SECTION("without it, --num_threads counts initiator threads (up to 64)") {
    auto c = check_args("--num_threads 64");
    CHECK(c.error.empty());
    CHECK(c.o.host_threads() == 64);
    c = check_args("--num_threads 128");
    CHECK(c.error.find("--num_threads 128") != std::string::npos);
    CHECK(c.error.find("--use_device_api") != std::string::npos);
    CHECK(check_args("--baseline kernel").error.find("--use_device_api") != std::string::npos);
    CHECK(check_args("--num_threads 8").o.buffer_size() == 8 * check_args("").o.per_thread());
  }
}

TEST_CASE("object stores: OBJ with curl or none, AZURE_BLOB without a baseline, DRAM only") {
  auto c = check_args("--backend OBJ");
  CHECK(c.error.empty());
  CHECK(c.o.baseline == "curl");
  CHECK(c.o.target_seg_type == "OBJ");
  c = check_args("--backend AZURE_BLOB");
  CHECK(c.error.empty());
  CHECK(c.o.baseline == "none");
  CHECK(c.o.object_store());
  CHECK(c.o.local_only());
  CHECK(check_args("--backend AZURE_BLOB --baseline curl").error.find("Shared Key") !=
        std::string::npos);
  CHECK(check_args("--backend AZURE_BLOB --initiator_seg_type VRAM").error.find("DRAM") !=
        std::string::npos);
  CHECK(check_args("--backend OBJ --baseline memcpy").error.find("curl or none") !=
        std::string::npos);
}
