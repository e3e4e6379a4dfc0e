// nixl-bench --backend OBJ and --backend AZURE_BLOB (obj_mode.hpp).
//
// Each point (block size B, batch size N) makes one request of N objects of B bytes each, all in
// flight at once, and posts it `iters` times: WRITE puts N objects, READ gets them (written
// once, untimed, first). The baseline is the curl tool on the same objects and server in the
// same run: one curl process that PUTs (or GETs) the N objects `iters` times with N transfers in
// flight (--parallel --parallel-max N), signed with --aws-sigv4, reusing its connections. Both
// sides leave out the 100-continue round trip (`Expect:`) and sign the payload as
// UNSIGNED-PAYLOAD (what curl 7.88 does for uploads; OBJ's unsigned_payload=true), so that the
// difference is the transfer machinery. AZURE_BLOB (azurite, Shared Key) has no baseline: the
// curl tool cannot sign Shared Key.
//
// Every post() is timed on its own (the table's and the CSV's post columns, as the other modes'),
// and so is each request from post() to its end.

#include "obj_mode.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
#include "report.hpp"

#if defined(NIXL_HAS_OBJ)
#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>
#endif

namespace nixl_bench {

#if !defined(NIXL_HAS_OBJ)

int run_obj(const options& o) {
  fail("--backend " + o.backend +
       ": this nixl-bench was built without the OBJ backends (NIXL_WITH_OBJ=ON, "
       "libcurl4-openssl-dev and libssl-dev)");
}

#else

namespace {

namespace fs = std::filesystem;

/// S3 (OBJ) on s3rver: the bucket is made by the server script.
struct s3_store {
  using backend = nixl::obj::backend;
  static constexpr const char* server = "s3";
  static void defaults(nixl::params& p, const std::string& endpoint) {
    p["endpoint_override"] = "http://" + endpoint;
    p.emplace("bucket", "nixl-test");
    p.emplace("access_key", "S3RVER");
    p.emplace("secret_key", "S3RVER");
  }
  static bool given(const nixl::params& p) {
    return p.count("endpoint_override") != 0 || std::getenv("AWS_ENDPOINT_OVERRIDE") != nullptr;
  }
  static void prepare(backend&, bool) {}
  static std::string where(const nixl::params& p) {
    const auto c = nixl::obj::config::from_params(p);
    return fmt::format("{}://{}/{}", c.scheme, c.endpoint, c.bucket);
  }
};

/// Azure Blob (AZURE_BLOB) on azurite, with its well-known development account; the container is
/// made for a server started here.
struct azure_store {
  using backend = nixl::azure_blob::backend;
  static constexpr const char* server = "azure";
  static void defaults(nixl::params& p, const std::string& endpoint) {
    p["account_url"] = fmt::format("http://{}/{}", endpoint, nixl::azure_blob::development_account);
    p.emplace("connection_string", "UseDevelopmentStorage=true");
    p.emplace("container_name", "nixl-test");
  }
  static bool given(const nixl::params& p) {
    return p.count("account_url") != 0 || p.count("connection_string") != 0 ||
           std::getenv("AZURE_STORAGE_CONNECTION_STRING") != nullptr;
  }
  static void prepare(backend& b, bool started_here) {
    if (started_here) b.create_bucket();
  }
  static std::string where(const nixl::params& p) {
    const auto c = nixl::azure_blob::config::from_params(p);
    return fmt::format("{}://{}{}/{}", c.scheme, c.host, c.path_prefix, c.container);
  }
};

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/// A store server for the run (scripts/obj-test-server.sh: s3rver or azurite), stopped at the end.
struct local_server {
  fs::path dir;
  std::string endpoint;
  explicit local_server(const std::string& kind) {
    std::string tmpl = (fs::temp_directory_path() / "nixl-bench-s3-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp failed");
    dir = tmpl;
    const fs::path out = dir / "start.out";
    const int rc = sh(fmt::format("{} start {} {} >{} 2>&1", NIXL_BENCH_OBJ_SCRIPT, kind,
                                  (dir / "srv").string(), out.string()));
    std::ifstream f(rc == 0 ? dir / "srv" / "endpoint" : out);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (rc == 77) {  // not installed: the ctest run of this mode counts it as skipped
      stop();
      fmt::print(stderr, "nixl-bench: skipped: the {} server is not installed: {}", kind, text);
      std::exit(77);
    }
    if (rc != 0) {
      stop();
      fail("could not start the " + kind +
           " server (give a store with --backend_params; docs/obj.md): " + text);
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

using us = std::chrono::duration<double, std::micro>;

/// Where a timed request's post and whole time go (us).
struct timings {
  std::vector<double> post, tx;
};

/// Posts and polls to the end. Object requests take milliseconds: the poll interval grows from
/// 20 us to 500 us (or the thread yields, with --yield), leaving the CPU to the engine's thread
/// and the server, as the curl tool, which blocks in poll(2), does.
/// With `t`, the post and the time to the end are recorded.
template <class Req>
nixl::status wait_done(Req& r, bool yield, timings* t = nullptr) {
  const auto t0 = clock::now();
  auto s = r.post();
  if (t != nullptr) t->post.push_back(us(clock::now() - t0).count());
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
  if (t != nullptr) t->tx.push_back(us(clock::now() - t0).count());
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

template <class Store>
int run_store(const options& o) {
  using backend = typename Store::backend;
  nixl::params p = backend_params(o);
  std::unique_ptr<local_server> srv;
  if (!Store::given(p)) {
    srv = std::make_unique<local_server>(Store::server);
    Store::defaults(p, srv->endpoint);
  }
  const bool s3 = std::is_same_v<Store, s3_store>;
  if (s3) p.emplace("unsigned_payload", "true");
  const bool put = o.op() == nixl::xfer_op::write;
  const bool curl = s3 && o.baseline == "curl";
  fmt::print(
      "nixl-bench --backend {}: {} {} ({}), baseline: {}\n", o.backend,
      put ? "WRITE (PUT)" : "READ (GET)", Store::where(p),
      srv ? fmt::format("{} started for this run", s3 ? "s3rver" : "azurite") : "given store",
      curl ? "curl, same objects and server" : "none");
  fmt::print("command: {}\n\n", o.command);

  nixl::agent<backend> a("nixl-bench-obj");
  a.template create_backend<backend>(p);
  Store::prepare(a.template get_backend<backend>(), srv != nullptr);
  const fs::path tmp = fs::temp_directory_path();
  const std::string tag = fmt::format("nixl-bench-obj-{}", ::getpid());

  fmt::print("{:>8} {:>6} {:>6} {:>12} {:>12} {:>8} {:>14} {:>10} {:>10} {:>6}\n", "block", "batch",
             "iters", "GB/s", "curl GB/s", "ratio", "lat (us)", "post (us)", "p99 post", "check");
  std::vector<row> rows;
  std::uint64_t dev = 1;
  const auto points =
      sweep_points(o.start_block_size, o.max_block_size, o.start_batch_size, o.max_batch_size,
                   o.num_iter, o.warmup_iter, o.large_blk_iter_ftr);
  // --warmup_ms: the first point's warm-up goes on until then
  auto warm_until = clock::now() + std::chrono::milliseconds(o.warmup_ms);
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
    row r;
    r.block = b;
    r.batch = n;
    r.iters = pt.iters;
    r.descs = n;
    {
      nixl::xfer_options xo;
      xo.skip_merge = true;
      auto w = a.create_request(nixl::xfer_op::write, mem, far, a.name(), xo);
      auto rd = a.create_request(nixl::xfer_op::read, mem, far, a.name(), xo);
      auto& req = put ? w : rd;
      const auto why = [&](auto& x) { return x.engine().error_message(x.backend_state()); };
      if (!put && wait_done(w, o.yield) != nixl::status::success)
        fail(fmt::format("{}: writing the objects of block {} failed: {}", o.backend, size_str(b),
                         why(w)));
      for (int i = 0; i < pt.warmup || clock::now() < warm_until; ++i)
        if (wait_done(req, o.yield) != nixl::status::success)
          fail(fmt::format("{}: {}", o.backend, why(req)));
      warm_until = {};
      timings t;
      t.post.reserve(static_cast<std::size_t>(pt.iters));
      t.tx.reserve(static_cast<std::size_t>(pt.iters));
      const auto t0 = clock::now();
      for (int i = 0; i < pt.iters; ++i)
        if (wait_done(req, o.yield, &t) != nixl::status::success)
          fail(fmt::format("{}: {}", o.backend, why(req)));
      const double secs = std::chrono::duration<double>(clock::now() - t0).count();
      r.gbps = static_cast<double>(n * b) * pt.iters / secs / 1e9;
      r.avg_lat = secs * 1e6 / pt.iters / static_cast<double>(n);
      r.post = summarize(t.post);
      r.tx = summarize(t.tx);
      if (o.check_consistency) {
        if (put) {  // read what was written into a cleared buffer
          std::memset(buf.data(), 0, buf.size());
          if (wait_done(rd, o.yield) != nixl::status::success)
            fail(fmt::format("{}: read-back failed", o.backend));
        }
        if (auto bad = check_pattern(buf.data(), 0, buf.size(), 7))
          fail(fmt::format("{}: data differs at byte {} of block {} x {}", o.backend, *bad,
                           size_str(b), n));
        r.checked = true;
      }
    }
    a.deregister_memory(objs);
    a.deregister_memory(dram);
    if (curl) {
      const fs::path file = tmp / (tag + "-" + size_str(b) + ".dat");
      {
        std::ofstream f(file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(b));
      }
      const fs::path cfgp = tmp / (tag + ".curl");
      const double secs =
          curl_run(nixl::obj::config::from_params(p), keys, put, file, pt.iters, n, cfgp);
      std::error_code ec;
      fs::remove(file, ec);
      fs::remove(cfgp, ec);
      r.base_gbps = static_cast<double>(n * b) * pt.iters / secs / 1e9;
      r.base_us = secs * 1e6 / pt.iters;
    }
    fmt::print("{:>8} {:>6} {:>6} {:>12.3f} {:>12} {:>8} {:>14.1f} {:>10.2f} {:>10.2f} {:>6}\n",
               size_str(b), n, pt.iters, r.gbps,
               r.base_gbps > 0 ? fmt::format("{:.3f}", r.base_gbps) : std::string("-"),
               ratio_str(r), r.tx.avg, r.post.avg, r.post.p99, r.checked ? "ok" : "-");
    std::fflush(stdout);
    rows.push_back(r);
  }
  const auto st = a.template get_backend<backend>().stats();
  fmt::print("\n{}: {} HTTP requests, {} retries\n", o.backend, st.attempts, st.retries);
  if (!o.csv.empty()) {
    const run_info info{o.backend, put ? "WRITE" : "READ",
                        "DRAM",    "OBJ",
                        "repost",  curl ? "curl" : "none",
                        1,         1,
                        false,     o.command};
    write_csv(o.csv, info, rows);
  }
  return 0;
}

}  // namespace

int run_obj(const options& o) {
  return o.backend == "AZURE_BLOB" ? run_store<azure_store>(o) : run_store<s3_store>(o);
}

#endif

}  // namespace nixl_bench
