// POSIX backend: setup errors, path mode and query_memory, through nixl::agent, threads.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <nixl/agent.hpp>
#include <nixl/backends/posix.hpp>

#include "nixl_test/catch.hpp"
#include "posix_test_support.hpp"

using namespace posix_test;

namespace {

/// The DRAM sides (`src` to write, `dst` to read into) and the file side of `count` scattered
/// pieces of `len` bytes in file `fd`.
auto file_lists(const buffer& src, const buffer& dst, std::size_t count, std::size_t len, int fd) {
  nixl::xfer_list<nixl::dram_t> from, to;
  nixl::xfer_list<nixl::file_t> in_file;
  for (auto pc : scattered(count, len)) {
    from.push_back({src.addr(pc.mem_off), pc.len, 0});
    to.push_back({dst.addr(pc.mem_off), pc.len, 0});
    in_file.push_back({pc.file_off, pc.len, static_cast<std::uint64_t>(fd)});
  }
  return std::tuple{from, to, in_file};
}

}  // namespace

TEST_CASE("posix: setup errors throw with a reason", "[posix]") {
  scratch tmp;
  backend b(backend::config::from_params({}), nixl::backend_context{"t"});
  SECTION("closed descriptor at registration") {
    int fd = ::open((tmp / "x").c_str(), O_RDWR | O_CREAT, 0600);
    ::close(fd);
    try {
      (void)b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, ""});
      FAIL("no throw");
    } catch (const nixl::error& e) {
      CHECK(e.status_code() == nixl::status::invalid_param);
      CHECK(std::string(e.what()).find("not an open file descriptor") != std::string::npos);
    }
  }
  SECTION("path that cannot be opened") {
    const auto missing = (tmp / "missing").string();
    try {
      (void)b.register_region(nixl::mem_kind::file, {{0, 0, 1}, "ro:" + missing});
      FAIL("no throw");
    } catch (const nixl::error& e) {
      CHECK(e.status_code() == nixl::status::invalid_param);
      const std::string msg = e.what();  // the call, errno's text, the path and the fix
      CHECK(msg.find("::open(") != std::string::npos);
      CHECK(msg.find("No such file or directory") != std::string::npos);
      CHECK(msg.find(missing) != std::string::npos);
      CHECK(msg.find("check the path and the mode") != std::string::npos);
    }
  }
  SECTION("kind not moved by POSIX") {
    CHECK_THROWS_AS(b.register_region(nixl::mem_kind::vram, {{4096, 4096, 0}, ""}), nixl::error);
  }
  SECTION("misaligned O_DIRECT descriptor") {
    int fd = ::open((tmp / "d").c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd < 0) return;
    fd_guard f(fd);
    buffer buf(8192);
    direct_rig rig({}, buf, f.fd);
    backend::request r;
    CHECK(rig.file.direct);
    CHECK_THROWS_AS(rig.prepare(r, nixl::xfer_op::read, buf, {{1, 0, 4096}}), nixl::error);
    CHECK_THROWS_AS(rig.prepare(r, nixl::xfer_op::read, buf, {{0, 100, 4096}}), nixl::error);
    CHECK_THROWS_AS(rig.prepare(r, nixl::xfer_op::read, buf, {{0, 0, 1000}}), nixl::error);
    CHECK_NOTHROW(rig.prepare(r, nixl::xfer_op::read, buf, {{0, 0, 4096}}));
  }
}

TEST_CASE("posix: path mode and query_memory", "[posix]") {
  scratch tmp;
  backend b(backend::config::from_params({}), nixl::backend_context{"t"});
  const auto path = (tmp / "pm").string();
  auto reg = b.register_region(nixl::mem_kind::file, {{0, 0, 42}, "rw,create:" + path});
  CHECK(reg.owns_fd);
  CHECK(reg.fd >= 0);
  CHECK(fs::exists(path));

  buffer buf(8192);
  buf.fill(9);
  auto mem = b.register_region(nixl::mem_kind::dram, {{buf.addr(), buf.size(), 0}, ""});
  auto rr = b.load_local(reg);
  auto peer = b.self_peer();
  nixl::bound_desc<backend::region> l;
  l.addr = buf.addr();
  l.len = buf.size();
  l.region = &mem;
  nixl::bound_desc<backend::remote_region> f;
  f.addr = 4096;
  f.len = buf.size();
  f.dev = 42;
  f.region = &rr;
  backend::request r;
  b.prepare(r, nixl::xfer_op::write, std::span(&l, 1), std::span(&f, 1), peer);
  CHECK(wait(b, r, b.post(r, std::nullopt)) == nixl::status::success);
  b.release(r);

  auto res = nixl::test::check_file_queries(b, tmp.dir, path, 4096 + 8192);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(res[1]->at("mode") == std::to_string(st.st_mode));
  CHECK(res[1]->at("mtime") == std::to_string(st.st_mtime));

  b.unload_region(rr);
  b.deregister_region(reg);
  b.deregister_region(mem);
  CHECK(reg.fd == -1);

  // Path mode with O_DIRECT: the flags reach open(2) and the alignment is enforced.
  auto dreg = b.register_region(nixl::mem_kind::file, {{0, 0, 43}, "rw,direct:" + path});
  if (dreg.direct) {
    CHECK(dreg.off_align >= 1);
    auto drr = b.load_local(dreg);
    buffer al(8192);
    al.set(std::byte{0});
    auto dmem = b.register_region(nixl::mem_kind::dram, {{al.addr(), al.size(), 0}, ""});
    l.addr = al.addr();
    l.len = 8192;
    l.region = &dmem;
    f.addr = 4096;
    f.len = 8192;
    f.dev = 43;
    f.region = &drr;
    backend::request dr;
    b.prepare(dr, nixl::xfer_op::read, std::span(&l, 1), std::span(&f, 1), peer);
    CHECK(wait(b, dr, b.post(dr, std::nullopt)) == nixl::status::success);
    CHECK(std::memcmp(al.data(), buf.data(), 8192) == 0);
    l.addr = al.addr() + 1;
    l.len = 4096;
    f.len = 4096;
    CHECK_THROWS_AS(b.prepare(dr, nixl::xfer_op::read, std::span(&l, 1), std::span(&f, 1), peer),
                    nixl::error);
    b.deregister_region(dmem);
  }
  b.deregister_region(dreg);
}

TEST_CASE("posix: through nixl::agent", "[posix][agent]") {
  const std::string e = GENERATE("URING", "AIO", "POSIX");
  DYNAMIC_SECTION(e) {
    scratch tmp;
    nixl::agent<backend> ag("posix-agent");
    ag.create_backend<backend>(engine_params(e));
    CHECK(ag.get_backend<backend>().engine_name() == e);

    fd_guard f(::open((tmp / "kv").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    const std::size_t count = GENERATE(1, 1000);
    const std::size_t len = 4096;
    buffer src(count * len), dst(count * len);
    src.fill(11);
    dst.set(std::byte{0});
    nixl::reg_list<nixl::dram_t> mem{{{src.addr(), src.size(), 0}, ""},
                                     {{dst.addr(), dst.size(), 0}, ""}};
    nixl::reg_list<nixl::file_t> files{
        {{0, 0, static_cast<std::uint64_t>(f.fd)}, (tmp / "kv").string()}};
    ag.register_memory(mem);
    ag.register_memory(files);

    auto [from, to, in_file] = file_lists(src, dst, count, len, f.fd);
    auto run = [](auto& req) {
      const auto s = req.post();
      return s == nixl::status::in_progress ? nixl::test::wait(req) : s;
    };
    auto w = ag.create_request(nixl::xfer_op::write, from, in_file, ag.name());
    REQUIRE(run(w) == nixl::status::success);
    auto r = ag.create_request(nixl::xfer_op::read, to, in_file, ag.name());
    REQUIRE(run(r) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);

    // Run-time kinds, as the Python module does.
    dst.set(std::byte{0});
    auto r2 = ag.create_request(nixl::xfer_op::read, nixl::xfer_dlist(to),
                                nixl::xfer_dlist(in_file), ag.name());
    auto s = run(r2);
    CHECK(s == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);

    auto info = ag.query_memory(nixl::reg_dlist(files), {{"POSIX"}});
    REQUIRE(info.size() == 1);
    REQUIRE(info[0].has_value());
    CHECK(std::stoull(info[0]->at("size")) >= count * len);

    // A read past the end through the agent: error, not partial success.
    nixl::xfer_list<nixl::file_t> past{{1ull << 30, len, static_cast<std::uint64_t>(f.fd)}};
    nixl::xfer_list<nixl::dram_t> one{{dst.addr(), len, 0}};
    auto bad = ag.create_request(nixl::xfer_op::read, one, past, ag.name());
    CHECK(run(bad) == nixl::status::backend);
  }
}

TEST_CASE("posix: threads share one backend", "[posix]") {
  const std::string e = GENERATE("URING", "AIO", "POSIX");
  DYNAMIC_SECTION(e) {
    scratch tmp;
    fd_guard f(::open((tmp / "shared").c_str(), O_RDWR | O_CREAT, 0600));
    constexpr int nthreads = 4;
    constexpr std::size_t count = 64, len = 8192;
    auto p = engine_params(e);
    p["kernel_queue_size"] = "16";
    backend be(backend::config::from_params(p), nixl::backend_context{"t"});
    auto fr =
        be.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(f.fd)}, ""});
    auto rf = be.load_local(fr);
    std::vector<std::unique_ptr<buffer>> src, dst;
    std::vector<backend::region> regs;
    regs.reserve(2 * nthreads);
    for (int t = 0; t < nthreads; ++t) {
      src.push_back(std::make_unique<buffer>(count * len));
      dst.push_back(std::make_unique<buffer>(count * len));
      src.back()->fill(100 + t);
      dst.back()->set(std::byte{0});
      regs.push_back(
          be.register_region(nixl::mem_kind::dram, {{src.back()->addr(), count * len, 0}, ""}));
      regs.push_back(
          be.register_region(nixl::mem_kind::dram, {{dst.back()->addr(), count * len, 0}, ""}));
    }
    // Each thread's first failure: which round and direction, and the status (0: none).
    std::vector<std::string> failures(nthreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < nthreads; ++t)
      ts.emplace_back([&, t] {
        auto peer = be.self_peer();
        for (int round = 0; round < 5; ++round) {
          for (int dir = 0; dir < 2; ++dir) {
            const buffer& b = dir == 0 ? *src[t] : *dst[t];
            std::vector<nixl::bound_desc<backend::region>> l(count);
            std::vector<nixl::bound_desc<backend::remote_region>> r(count);
            for (std::size_t i = 0; i < count; ++i) {
              l[i].addr = b.addr(i * len);
              l[i].len = len;
              l[i].region = &regs[2 * t + dir];
              r[i].addr = (static_cast<std::size_t>(t) * count + i) * len;
              r[i].len = len;
              r[i].region = &rf;
            }
            backend::request req;
            be.prepare(req, dir == 0 ? nixl::xfer_op::write : nixl::xfer_op::read, l, r, peer);
            const auto posted = be.post(req, std::nullopt);
            const auto st = wait(be, req, posted);
            if (st != nixl::status::success && failures[t].empty())
              failures[t] =
                  fmt::format("round {} {}: post {}, then {}", round, dir == 0 ? "write" : "read",
                              nixl::to_string(posted), nixl::to_string(st));
            be.release(req);
          }
        }
      });
    for (auto& t : ts) t.join();
    for (int t = 0; t < nthreads; ++t) {
      INFO("thread " << t);
      CHECK(failures[t] == "");
      CHECK(std::memcmp(src[t]->data(), dst[t]->data(), count * len) == 0);
    }
    be.deregister_region(fr);
  }
}

TEST_CASE("posix: request::wait ends with a file transfer, on every engine", "[posix][agent]") {
  using namespace std::chrono_literals;
  using clk = std::chrono::steady_clock;
  const std::string e = GENERATE("URING", "AIO", "POSIX");
  DYNAMIC_SECTION(e) {
    scratch tmp;
    nixl::agent<backend> ag("posix-wait");
    ag.create_backend<backend>(engine_params(e));
    fd_guard f(::open((tmp / "w").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    const std::size_t count = 256, len = 16384;
    buffer src(count * len), dst(count * len);
    src.fill(23);
    dst.set(std::byte{0});
    ag.register_memory(nixl::reg_list<nixl::dram_t>{{{src.addr(), src.size(), 0}, ""},
                                                    {{dst.addr(), dst.size(), 0}, ""}});
    ag.register_memory(nixl::reg_list<nixl::file_t>{
        {{0, 0, static_cast<std::uint64_t>(f.fd)}, (tmp / "w").string()}});
    auto [from, to, in_file] = file_lists(src, dst, count, len, f.fd);
    (void)ag.event_fd();  // an event loop holds the fd as well: waits still end
    for (auto op : {nixl::xfer_op::write, nixl::xfer_op::read}) {
      auto r = ag.create_request(op, op == nixl::xfer_op::write ? from : to, in_file, ag.name());
      CHECK(r.wait(1ms) == nixl::status::not_posted);
      const auto s = r.post();
      REQUIRE((s == nixl::status::success || s == nixl::status::in_progress));
      const auto t0 = clk::now();
      CHECK(r.wait(60s) == nixl::status::success);
      CHECK(clk::now() - t0 < 60s);
    }
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  }
}
