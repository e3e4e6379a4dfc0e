// nixl-bench --backend OBJ (obj_mode.hpp).
//
// Each point (block size B, batch size N) makes one request of N objects of B bytes each, all in
// flight at once, and posts it `iters` times: WRITE puts N objects, READ gets them (written
// once, untimed, first). The baseline is the curl tool on the same objects and server in the
// same run: one curl process that PUTs (or GETs) the N objects `iters` times with N transfers in
// flight (--parallel --parallel-max N), signed with --aws-sigv4, reusing its connections. Both
// sides leave out the 100-continue round trip (`Expect:`) and sign the payload as
// UNSIGNED-PAYLOAD (what curl 7.88 does for uploads; OBJ's unsigned_payload=true), so that the
// difference is the transfer machinery.

#include "obj_mode.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_common.hpp"

#if defined(NIXL_HAS_OBJ)
#include <nixl/agent.hpp>
#include <nixl/backends/obj.hpp>
#endif

namespace nixl_bench {

#if !defined(NIXL_HAS_OBJ)

int run_obj(const options&) {
  fail(
      "--backend OBJ: this nixl-bench was built without the OBJ backend (NIXL_WITH_OBJ=ON, "
      "libcurl4-openssl-dev and libssl-dev)");
}

#else

namespace {

namespace fs = std::filesystem;
using obj_agent = nixl::agent<nixl::obj::backend>;

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/// An s3rver for the run (scripts/obj-test-server.sh), stopped at the end.
struct local_server {
  fs::path dir;
  std::string endpoint;
  local_server() {
    std::string tmpl = (fs::temp_directory_path() / "nixl-bench-s3-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp failed");
    dir = tmpl;
    const fs::path out = dir / "start.out";
    const int rc = sh(fmt::format("{} start s3 {} >{} 2>&1", NIXL_BENCH_OBJ_SCRIPT,
                                  (dir / "srv").string(), out.string()));
    std::ifstream f(rc == 0 ? dir / "srv" / "endpoint" : out);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (rc == 77) {  // not installed: the ctest run of this mode counts it as skipped
      stop();
      fmt::print(stderr, "nixl-bench --backend OBJ: skipped: s3rver is not installed: {}", text);
      std::exit(77);
    }
    if (rc != 0) {
      stop();
      fail(
          "--backend OBJ: could not start s3rver (give a store with --backend_params "
          "endpoint_override=...): " +
          text);
    }
    endpoint = text.substr(0, text.find('\n'));
  }
  void stop() {
    sh(fmt::format("{} stop {} >/dev/null 2>&1", NIXL_BENCH_OBJ_SCRIPT, (dir / "srv").string()));
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  ~local_server() { stop(); }
};

struct result {
  double obj_gbps = 0, curl_gbps = 0, obj_lat_us = 0;
  bool checked = false;
  std::string error;
};

/// Posts and polls to the end. Object requests take milliseconds: the poll interval grows from
/// 20 us to 500 us (or the thread yields, with --yield), leaving the CPU to the engine's thread
/// and the server, as the curl tool, which blocks in poll(2), does.
template <class Req>
nixl::status wait_done(Req& r, bool yield) {
  auto s = r.post();
  auto nap = std::chrono::microseconds(20);
  while (s == nixl::status::in_progress) {
    if (yield) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(500));
    }
    s = r.status();
  }
  return s;
}

/// The curl tool moving the point's objects `iters` times: seconds. Throws when curl fails.
double curl_run(const nixl::obj::config& c, const std::vector<std::string>& keys, bool put,
                const fs::path& file, int iters, std::size_t in_flight, const fs::path& cfg_path) {
  {
    std::ofstream cfg(cfg_path);
    for (int it = 0; it < iters; ++it)
      for (const auto& k : keys) {
        cfg << "url = \"" << c.scheme << "://" << c.endpoint << "/" << c.bucket << "/" << k
            << "\"\n";
        if (put)
          cfg << "upload-file = \"" << file.string() << "\"\n";
        else
          cfg << "output = \"/dev/null\"\n";
      }
  }
  const std::string cmd = fmt::format(
      "curl -sS --no-progress-meter --fail --parallel --parallel-max {} --aws-sigv4 "
      "'aws:amz:{}:s3' --user '{}:{}' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -H 'Expect:' "
      "-K '{}' >/dev/null 2>'{}.err'",
      in_flight, c.region, c.access_key, c.secret_key, cfg_path.string(), cfg_path.string());
  const auto t0 = clock::now();
  const int rc = sh(cmd);
  const auto t1 = clock::now();
  std::ifstream err(cfg_path.string() + ".err");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove(cfg_path.string() + ".err", ec);
  if (rc != 0) fail(fmt::format("curl baseline failed (exit {}): {}", rc, text.substr(0, 2000)));
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace

int run_obj(const options& o) {
  nixl::params p = backend_params(o);
  std::unique_ptr<local_server> srv;
  if (!p.count("endpoint_override") && std::getenv("AWS_ENDPOINT_OVERRIDE") == nullptr) {
    srv = std::make_unique<local_server>();
    p["endpoint_override"] = "http://" + srv->endpoint;
    p.emplace("bucket", "nixl-test");
    p.emplace("access_key", "S3RVER");
    p.emplace("secret_key", "S3RVER");
  }
  p.emplace("unsigned_payload", "true");
  const auto cfg = nixl::obj::config::from_params(p);
  const bool put = o.op() == nixl::xfer_op::write;
  fmt::print("nixl-bench --backend OBJ: {} {}://{}/{} ({}), baseline: {}\n",
             put ? "WRITE (PUT)" : "READ (GET)", cfg.scheme, cfg.endpoint, cfg.bucket,
             srv ? "s3rver started for this run" : "given store",
             o.baseline == "none" ? "none" : "curl, same objects and server");
  fmt::print("command: {}\n\n", o.command);

  obj_agent a("nixl-bench-obj");
  a.create_backend<nixl::obj::backend>(p);
  const fs::path tmp = fs::temp_directory_path();
  const std::string tag = fmt::format("nixl-bench-obj-{}", ::getpid());

  fmt::print("{:>8} {:>6} {:>6} {:>12} {:>12} {:>8} {:>14} {:>6}\n", "block", "batch", "iters",
             "OBJ GB/s", "curl GB/s", "ratio", "OBJ lat (us)", "check");
  std::uint64_t dev = 1;
  const auto points =
      sweep_points(o.start_block_size, o.max_block_size, o.start_batch_size, o.max_batch_size,
                   o.num_iter, o.warmup_iter, o.large_blk_iter_ftr);
  for (const auto& pt : points) {
    const std::size_t n = pt.batch, b = pt.block;
    host_buffer buf(n * b);
    fill_pattern(buf.data(), 0, buf.size(), 7);
    std::vector<std::string> keys;
    nixl::reg_list<nixl::object_t> objs;
    nixl::xfer_list<nixl::dram_t> mem;
    nixl::xfer_list<nixl::object_t> far;
    for (std::size_t i = 0; i < n; ++i) {
      keys.push_back(fmt::format("{}/{}/{}", tag, size_str(b), i));
      objs.push_back({{0, 0, dev}, keys.back()});
      mem.push_back({buf.addr() + i * b, b, 0});
      far.push_back({0, b, dev});
      ++dev;
    }
    nixl::reg_list<nixl::dram_t> dram{{{buf.addr(), buf.size(), 0}, ""}};
    a.register_memory(dram);
    a.register_memory(objs);
    result r;
    {
      nixl::xfer_options xo;
      xo.skip_merge = true;
      auto w = a.create_request(nixl::xfer_op::write, mem, far, a.name(), xo);
      auto rd = a.create_request(nixl::xfer_op::read, mem, far, a.name(), xo);
      auto& req = put ? w : rd;
      if (!put && wait_done(w, o.yield) != nixl::status::success)
        fail(fmt::format("OBJ: writing the objects of block {} failed: {}", size_str(b),
                         w.engine().error_message(w.backend_state())));
      for (int i = 0; i < pt.warmup; ++i)
        if (wait_done(req, o.yield) != nixl::status::success)
          fail(fmt::format("OBJ: {}", req.engine().error_message(req.backend_state())));
      const auto t0 = clock::now();
      for (int i = 0; i < pt.iters; ++i)
        if (wait_done(req, o.yield) != nixl::status::success)
          fail(fmt::format("OBJ: {}", req.engine().error_message(req.backend_state())));
      const double secs = std::chrono::duration<double>(clock::now() - t0).count();
      r.obj_gbps = static_cast<double>(n * b) * pt.iters / secs / 1e9;
      r.obj_lat_us = secs * 1e6 / pt.iters;
      if (o.check_consistency) {
        if (put) {  // read what was written into a cleared buffer
          std::memset(buf.data(), 0, buf.size());
          if (wait_done(rd, o.yield) != nixl::status::success) fail("OBJ: read-back failed");
        }
        if (auto bad = check_pattern(buf.data(), 0, buf.size(), 7))
          fail(fmt::format("OBJ: data differs at byte {} of block {} x {}", *bad, size_str(b), n));
        r.checked = true;
      }
    }
    a.deregister_memory(objs);
    a.deregister_memory(dram);
    if (o.baseline != "none") {
      const fs::path file = tmp / (tag + "-" + size_str(b) + ".dat");
      {
        std::ofstream f(file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(b));
      }
      const fs::path cfgp = tmp / (tag + ".curl");
      const double secs = curl_run(cfg, keys, put, file, pt.iters, n, cfgp);
      std::error_code ec;
      fs::remove(file, ec);
      fs::remove(cfgp, ec);
      r.curl_gbps = static_cast<double>(n * b) * pt.iters / secs / 1e9;
    }
    fmt::print("{:>8} {:>6} {:>6} {:>12.3f} {:>12.3f} {:>8.2f} {:>14.1f} {:>6}\n", size_str(b), n,
               pt.iters, r.obj_gbps, r.curl_gbps, r.curl_gbps > 0 ? r.obj_gbps / r.curl_gbps : 0.0,
               r.obj_lat_us, r.checked ? "ok" : "-");
    std::fflush(stdout);
  }
  const auto st = a.get_backend<nixl::obj::backend>().stats();
  fmt::print("\nOBJ: {} HTTP requests, {} retries\n", st.attempts, st.retries);
  return 0;
}

#endif

}  // namespace nixl_bench
