// Above 600 lines: the POSIX backend's test cases, one per behaviour, for all three engines.
// POSIX backend: every engine, through the backend contract and through nixl::agent.

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/posix.hpp>

#include "nixl_test/catch.hpp"

namespace fs = std::filesystem;
using nixl::posix::backend;

namespace {

/// A scratch folder removed at the end of the test.
struct scratch {
  fs::path dir;
  scratch() {
    std::string tmpl = (fs::temp_directory_path() / "nixl-posix-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path operator/(const std::string& n) const { return dir / n; }
};

/// An open file descriptor closed at scope exit.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) : fd(f) { REQUIRE(fd >= 0); }
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  fd_guard(const fd_guard&) = delete;
};

/// Page-aligned memory (O_DIRECT needs it).
struct buffer {
  std::byte* p = nullptr;
  std::size_t n = 0;
  explicit buffer(std::size_t size) : n(size) {
    p = static_cast<std::byte*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096));
    REQUIRE(p != nullptr);
  }
  ~buffer() { std::free(p); }
  buffer(const buffer&) = delete;
  std::uintptr_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(p + off);
  }
  void fill(std::uint32_t seed) {
    std::mt19937 g(seed);
    auto* w = reinterpret_cast<std::uint32_t*>(p);
    for (std::size_t i = 0; i < n / 4; ++i) w[i] = static_cast<std::uint32_t>(g());
  }
  void zero() { std::memset(p, 0, n); }
};

nixl::params engine_params(const std::string& e) {
  if (e == "URING") return {{"use_uring", "true"}};
  if (e == "AIO") return {{"use_aio", "true"}};
  if (e == "POSIX") return {{"use_posix", "true"}};
  if (e == "POSIX-inline") return {{"use_posix", "true"}, {"num_threads", "0"}};
  return {};
}

/// Drives a request of the bare backend to its end.
nixl::status wait(backend& b, backend::request& r, nixl::status s) {
  while (s == nixl::status::in_progress) {
    s = b.check(r);
    if (s == nixl::status::in_progress) std::this_thread::yield();
  }
  return s;
}

/// The backend contract without an agent: one dram region, one file region, pairs of
/// (memory offset, file offset, length).
struct direct_rig {
  backend b;
  backend::region mem;
  backend::region file;
  backend::remote_region rfile;
  backend::peer self;

  direct_rig(const nixl::params& p, const buffer& buf, int fd)
      : b(backend::config::from_params(p), nixl::backend_context{"test"}) {
    mem = b.register_region(nixl::mem_kind::dram, {{buf.addr(), buf.n, 0}, ""});
    file = b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, ""});
    rfile = b.load_local(file);
    self = b.self_peer();
  }
  ~direct_rig() {
    b.unload_region(rfile);
    b.deregister_region(file);
    b.deregister_region(mem);
  }

  struct piece {
    std::size_t mem_off, file_off, len;
  };
  void prepare(backend::request& r, nixl::xfer_op op, const buffer& buf,
               const std::vector<piece>& pieces) {
    std::vector<nixl::bound_desc<backend::region>> l;
    std::vector<nixl::bound_desc<backend::remote_region>> rm;
    for (const auto& pc : pieces) {
      nixl::bound_desc<backend::region> a;
      a.addr = buf.addr(pc.mem_off);
      a.len = pc.len;
      a.region = &mem;
      nixl::bound_desc<backend::remote_region> f;
      f.addr = pc.file_off;
      f.len = pc.len;
      f.dev = static_cast<std::uint64_t>(file.fd);
      f.region = &rfile;
      l.push_back(a);
      rm.push_back(f);
    }
    b.prepare(r, op, l, rm, self);
  }
  nixl::status run(nixl::xfer_op op, const buffer& buf, const std::vector<piece>& pieces) {
    backend::request r;
    prepare(r, op, buf, pieces);
    auto s = wait(b, r, b.post(r, std::nullopt));
    b.release(r);
    return s;
  }
};

/// `count` pieces of `len` bytes; the file side in a shuffled order with gaps, so that no two
/// neighbours are contiguous in both memory and file.
std::vector<direct_rig::piece> scattered(std::size_t count, std::size_t len) {
  std::vector<std::size_t> slot(count);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937(7));
  std::vector<direct_rig::piece> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back({i * len, slot[i] * (len + 4096), len});
  return out;
}

}  // namespace

TEST_CASE("posix: concepts", "[posix]") {
  STATIC_REQUIRE(nixl::backend<backend>);
  STATIC_REQUIRE(nixl::loopback_backend<backend>);
  STATIC_REQUIRE(nixl::querying_backend<backend>);
  STATIC_REQUIRE(!nixl::remote_backend<backend>);
  STATIC_REQUIRE(!nixl::notifying_backend<backend>);
  STATIC_REQUIRE(nixl::backend_for<backend, nixl::dram_t, nixl::file_t>);
  STATIC_REQUIRE(!nixl::backend_for<backend, nixl::dram_t, nixl::dram_t>);
  STATIC_REQUIRE(!nixl::backend_for<backend, nixl::vram_t, nixl::file_t>);
  STATIC_REQUIRE(backend::name == "POSIX");
}

TEST_CASE("posix: parameters", "[posix]") {
  auto d = backend::config::from_params({});
  CHECK_FALSE(d.preferred.has_value());
  CHECK(d.queue_depth == 256);
  CHECK(backend::default_params().count("use_uring") == 1);
  CHECK(backend::default_params().count("kernel_queue_size") == 1);

  auto a = backend::config::from_params({{"use_aio", "true"}, {"use_uring", "true"}});
  CHECK(a.preferred == nixl::posix::detail::engine_kind::aio);  // NIXL's order: aio first
  auto p = backend::config::from_params({{"use_posix_aio", "1"}, {"num_threads", "2"}});
  CHECK(p.preferred == nixl::posix::detail::engine_kind::posix);
  CHECK(p.threads == 2);
  auto rt = backend::config::from_params(p.to_params());
  CHECK(rt.preferred == p.preferred);
  CHECK(rt.threads == 2);

  CHECK_THROWS_AS(backend::config::from_params({{"use_uring", "maybe"}}), nixl::error);
  CHECK_THROWS_AS(backend::config::from_params({{"kernel_queue_size", "0"}}), nixl::error);
  CHECK_THROWS_AS(backend::config::from_params({{"kernel_queue_size", "12x"}}), nixl::error);
  try {
    (void)backend::config::from_params({{"num_threads", "-1"}});
    FAIL("no throw");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == nixl::status::invalid_param);
    CHECK(std::string(e.what()).find("num_threads") != std::string::npos);
  }
}

TEST_CASE("posix: engine choice and fallback", "[posix]") {
  nixl::backend_context ctx{"test"};
  for (std::string e : {"URING", "AIO", "POSIX"}) {
    backend b(backend::config::from_params(engine_params(e)), ctx);
    if (nixl::posix::detail::engine_built(e == "URING" ? nixl::posix::detail::engine_kind::uring
                                          : e == "AIO" ? nixl::posix::detail::engine_kind::aio
                                                       : nixl::posix::detail::engine_kind::posix))
      CHECK(b.engine_name() == e);
  }
  // Everything switched off still leaves the plain engine.
  backend none(backend::config::from_params(
                   {{"use_uring", "false"}, {"use_aio", "false"}, {"use_posix", "false"}}),
               ctx);
  CHECK(none.engine_name() == "POSIX");
  backend q(backend::config::from_params({{"use_uring", "true"}, {"kernel_queue_size", "8"}}), ctx);
  CHECK(q.queue_depth() <= 8);
}

namespace {
/// In a child process: forbid io_uring_setup (and io_setup when `no_aio`) with seccomp, start a
/// backend that asks for io_uring, and exit with 0 when it fell back to `expected`, 1 when it
/// did not, 2 when seccomp is not available here.
int fallback_child(bool no_aio, std::string_view expected) {
  pid_t pid = ::fork();
  if (pid < 0) return 3;
  if (pid == 0) {
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                 static_cast<__u32>(no_aio ? __NR_io_setup : __NR_io_uring_setup), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof(f) / sizeof(f[0])), f};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
      ::_exit(2);
    try {
      backend b(backend::config::from_params({{"use_uring", "true"}}), nixl::backend_context{"fb"});
      ::_exit(b.engine_name() == expected ? 0 : 1);
    } catch (...) {
      ::_exit(1);
    }
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
}
}  // namespace

TEST_CASE("posix: an engine that cannot start falls back to the next", "[posix]") {
  if (!nixl::posix::detail::engine_built(nixl::posix::detail::engine_kind::uring) ||
      !nixl::posix::detail::engine_built(nixl::posix::detail::engine_kind::aio))
    NIXL_SKIP("needs both io_uring and AIO in the build");
  int r = fallback_child(false, "AIO");
  if (r == 2) NIXL_SKIP("seccomp filters are not available here");
  CHECK(r == 0);
  CHECK(fallback_child(true, "POSIX") == 0);
}

TEST_CASE("posix: short transfers and EINTR are resubmitted", "[posix]") {
  using namespace nixl::posix::detail;
  scratch tmp;
  fd_guard f(::open((tmp / "f").c_str(), O_RDWR | O_CREAT, 0600));
  REQUIRE(::ftruncate(f.fd, 1 << 20) == 0);
  io_op op{nullptr, 0, 8192, 0, f.fd};
  CHECK(apply_result(op, false, -EINTR).what == op_result::again);
  CHECK(apply_result(op, false, -EAGAIN).what == op_result::again);
  CHECK(apply_result(op, false, 100).what == op_result::again);
  CHECK(op.done == 100);
  CHECK(apply_result(op, false, 8092).what == op_result::finished);
  io_op tail{nullptr, (1 << 20) - 4096, 8192, 0, f.fd};
  auto r = apply_result(tail, false, 4096);  // stopped at the end of the file
  CHECK(r.what == op_result::failed);
  CHECK(r.err == eof_error);
  io_op w{nullptr, 0, 4096, 0, f.fd};
  CHECK(apply_result(w, true, 0).what == op_result::failed);
  auto bad = apply_result(w, true, -EBADF);
  CHECK(bad.what == op_result::failed);
  CHECK(error_text(bad.err) == std::system_category().message(EBADF));
  CHECK(error_text(eof_error) == "read past end of file");
}

TEST_CASE("posix: write then read back", "[posix]") {
  const std::string e = GENERATE("URING", "AIO", "POSIX", "POSIX-inline");
  const bool direct = GENERATE(false, true);
  DYNAMIC_SECTION(e << (direct ? " O_DIRECT" : " buffered")) {
    scratch tmp;
    int flags = O_RDWR | O_CREAT | O_CLOEXEC | (direct ? O_DIRECT : 0);
    int fd = ::open((tmp / "data").c_str(), flags, 0600);
    if (fd < 0 && direct) {
      WARN("O_DIRECT not supported by " << tmp.dir << ": skipped");
      return;
    }
    fd_guard f(fd);
    struct shape {
      std::size_t count, len;
    };
    // 1 and 1000 descriptors, 4 KiB to 64 MiB.
    std::vector<shape> shapes = {{1, 4096},   {1000, 4096},  {1, 1 << 20},
                                 {64, 65536}, {4, 16 << 20}, {1, 64 << 20}};
    for (auto [count, len] : shapes) {
      INFO(count << " x " << len);
      buffer src(count * len), dst(count * len);
      src.fill(static_cast<std::uint32_t>(count * 31 + len));
      dst.zero();
      {
        direct_rig rig(engine_params(e), src, f.fd);
        REQUIRE(rig.run(nixl::xfer_op::write, src, scattered(count, len)) == nixl::status::success);
      }
      {
        direct_rig rig(engine_params(e), dst, f.fd);
        REQUIRE(rig.run(nixl::xfer_op::read, dst, scattered(count, len)) == nixl::status::success);
      }
      REQUIRE(std::memcmp(src.p, dst.p, src.n) == 0);
    }
  }
}

TEST_CASE("posix: deep queues, small queues and concurrent requests", "[posix]") {
  const std::string e = GENERATE("URING", "AIO", "POSIX");
  DYNAMIC_SECTION(e) {
    scratch tmp;
    fd_guard f(::open((tmp / "data").c_str(), O_RDWR | O_CREAT, 0600));
    const std::size_t count = 1000, len = 4096;
    buffer a(count * len), b2(count * len), back(count * len);
    a.fill(1);
    b2.fill(2);
    auto p = engine_params(e);
    p["kernel_queue_size"] = "4";  // 1000 operations through 4 slots
    p["num_threads"] = "3";
    backend be(backend::config::from_params(p), nixl::backend_context{"t"});
    auto ma = be.register_region(nixl::mem_kind::dram, {{a.addr(), a.n, 0}, ""});
    auto mb = be.register_region(nixl::mem_kind::dram, {{b2.addr(), b2.n, 0}, ""});
    auto fr =
        be.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(f.fd)}, ""});
    auto rf = be.load_local(fr);
    auto peer = be.self_peer();
    auto make = [&](backend::request& r, const backend::region& m, const buffer& buf,
                    std::size_t file_base, nixl::xfer_op op) {
      std::vector<nixl::bound_desc<backend::region>> l(count);
      std::vector<nixl::bound_desc<backend::remote_region>> rm(count);
      for (std::size_t i = 0; i < count; ++i) {
        l[i].addr = buf.addr(i * len);
        l[i].len = len;
        l[i].region = &m;
        rm[i].addr = file_base + (count - 1 - i) * len;  // reversed
        rm[i].len = len;
        rm[i].region = &rf;
      }
      be.prepare(r, op, l, rm, peer);
    };
    backend::request ra, rb;
    make(ra, ma, a, 0, nixl::xfer_op::write);
    make(rb, mb, b2, count * len, nixl::xfer_op::write);
    auto sa = be.post(ra, std::nullopt);
    auto sb = be.post(rb, std::nullopt);
    CHECK(wait(be, rb, sb) == nixl::status::success);
    CHECK(wait(be, ra, sa) == nixl::status::success);
    // Repost of a finished request is allowed.
    CHECK(wait(be, ra, be.post(ra, std::nullopt)) == nixl::status::success);
    backend::request rd;
    make(rd, ma, back, count * len, nixl::xfer_op::read);
    CHECK(wait(be, rd, be.post(rd, std::nullopt)) == nixl::status::success);
    CHECK(std::memcmp(back.p, b2.p, back.n) == 0);
    // Release in flight: nothing runs after it returns.
    backend::request rc;
    make(rc, ma, back, 0, nixl::xfer_op::read);
    auto sc = be.post(rc, std::nullopt);
    CHECK(nixl::ok(sc));
    CHECK(be.release(rc) == nixl::status::success);
    CHECK(be.post(ra, std::string_view("done")) == nixl::status::not_supported);
    be.deregister_region(fr);
  }
}

TEST_CASE("posix: errors end the request with an error status", "[posix]") {
  const std::string e = GENERATE("URING", "AIO", "POSIX", "POSIX-inline");
  DYNAMIC_SECTION(e) {
    scratch tmp;
    buffer buf(3 * 8192);
    buf.fill(3);

    SECTION("read past the end of a short file") {
      fd_guard f(::open((tmp / "short").c_str(), O_RDWR | O_CREAT, 0600));
      REQUIRE(::pwrite(f.fd, buf.p, 6000, 0) == 6000);
      direct_rig rig(engine_params(e), buf, f.fd);
      CHECK(rig.run(nixl::xfer_op::read, buf, {{0, 0, 4096}}) == nixl::status::success);
      CHECK(rig.run(nixl::xfer_op::read, buf, {{0, 0, 8192}}) == nixl::status::backend);
      CHECK(rig.run(nixl::xfer_op::read, buf, {{0, 4096, 4096}}) == nixl::status::backend);
      CHECK(rig.run(nixl::xfer_op::read, buf, {{0, 1 << 20, 4096}}) == nixl::status::backend);
      // One bad descriptor among good ones fails the whole request.
      CHECK(rig.run(nixl::xfer_op::read, buf,
                    {{0, 0, 1000}, {8192, 5000, 2000}, {16384, 0, 512}}) == nixl::status::backend);
    }
    SECTION("write to a read-only descriptor") {
      { fd_guard w(::open((tmp / "ro").c_str(), O_RDWR | O_CREAT, 0600)); }
      fd_guard f(::open((tmp / "ro").c_str(), O_RDONLY));
      direct_rig rig(engine_params(e), buf, f.fd);
      CHECK(rig.run(nixl::xfer_op::write, buf, {{0, 0, 4096}}) == nixl::status::backend);
      CHECK(rig.run(nixl::xfer_op::write, buf, scattered(3, 4096)) == nixl::status::backend);
    }
    SECTION("a descriptor closed after registration") {
      int fd = ::open((tmp / "closed").c_str(), O_RDWR | O_CREAT, 0600);
      REQUIRE(fd >= 0);
      direct_rig rig(engine_params(e), buf, fd);
      ::close(fd);
      CHECK(rig.run(nixl::xfer_op::write, buf, {{0, 0, 4096}}) == nixl::status::backend);
      CHECK(rig.run(nixl::xfer_op::read, buf, {{0, 0, 4096}}) == nixl::status::backend);
    }
  }
}

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
  auto mem = b.register_region(nixl::mem_kind::dram, {{buf.addr(), buf.n, 0}, ""});
  auto rr = b.load_local(reg);
  auto peer = b.self_peer();
  nixl::bound_desc<backend::region> l;
  l.addr = buf.addr();
  l.len = buf.n;
  l.region = &mem;
  nixl::bound_desc<backend::remote_region> f;
  f.addr = 4096;
  f.len = buf.n;
  f.dev = 42;
  f.region = &rr;
  backend::request r;
  b.prepare(r, nixl::xfer_op::write, std::span(&l, 1), std::span(&f, 1), peer);
  CHECK(wait(b, r, b.post(r, std::nullopt)) == nixl::status::success);
  b.release(r);

  std::vector<nixl::reg_desc> q = {{{0, 0, 42}, "rw,create:" + path},
                                   {{0, 0, 0}, path},
                                   {{0, 0, 0}, (tmp / "nope").string()},
                                   {{0, 0, 0}, "ro:" + (tmp / "nope").string()}};
  auto res = b.query_memory(q);
  REQUIRE(res.size() == 4);
  REQUIRE(res[0].has_value());
  REQUIRE(res[1].has_value());
  CHECK(res[0]->at("size") == std::to_string(4096 + 8192));
  CHECK(res[1]->at("size") == std::to_string(4096 + 8192));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(res[1]->at("mode") == std::to_string(st.st_mode));
  CHECK(res[1]->at("mtime") == std::to_string(st.st_mtime));
  CHECK_FALSE(res[2].has_value());
  CHECK_FALSE(res[3].has_value());

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
    al.zero();
    auto dmem = b.register_region(nixl::mem_kind::dram, {{al.addr(), al.n, 0}, ""});
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
    CHECK(std::memcmp(al.p, buf.p, 8192) == 0);
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
    dst.zero();
    nixl::reg_list<nixl::dram_t> mem{{{src.addr(), src.n, 0}, ""}, {{dst.addr(), dst.n, 0}, ""}};
    nixl::reg_list<nixl::file_t> files{
        {{0, 0, static_cast<std::uint64_t>(f.fd)}, (tmp / "kv").string()}};
    ag.register_memory(mem);
    ag.register_memory(files);

    nixl::xfer_list<nixl::dram_t> from, to;
    nixl::xfer_list<nixl::file_t> in_file;
    for (auto pc : scattered(count, len)) {
      from.push_back({src.addr(pc.mem_off), pc.len, 0});
      to.push_back({dst.addr(pc.mem_off), pc.len, 0});
      in_file.push_back({pc.file_off, pc.len, static_cast<std::uint64_t>(f.fd)});
    }
    auto run = [](auto& req) {
      auto s = req.post();
      while (s == nixl::status::in_progress) s = req.status();
      return s;
    };
    auto w = ag.create_request(nixl::xfer_op::write, from, in_file, ag.name());
    REQUIRE(run(w) == nixl::status::success);
    auto r = ag.create_request(nixl::xfer_op::read, to, in_file, ag.name());
    REQUIRE(run(r) == nixl::status::success);
    CHECK(std::memcmp(src.p, dst.p, src.n) == 0);

    // Run-time kinds, as the Python module does.
    dst.zero();
    auto r2 = ag.create_request(nixl::xfer_op::read, nixl::xfer_dlist(to),
                                nixl::xfer_dlist(in_file), ag.name());
    auto s = run(r2);
    CHECK(s == nixl::status::success);
    CHECK(std::memcmp(src.p, dst.p, src.n) == 0);

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
      dst.back()->zero();
      regs.push_back(
          be.register_region(nixl::mem_kind::dram, {{src.back()->addr(), count * len, 0}, ""}));
      regs.push_back(
          be.register_region(nixl::mem_kind::dram, {{dst.back()->addr(), count * len, 0}, ""}));
    }
    std::vector<int> failures(nthreads, 0);
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
            if (wait(be, req, be.post(req, std::nullopt)) != nixl::status::success) ++failures[t];
            be.release(req);
          }
        }
      });
    for (auto& t : ts) t.join();
    for (int t = 0; t < nthreads; ++t) {
      CHECK(failures[t] == 0);
      CHECK(std::memcmp(src[t]->p, dst[t]->p, count * len) == 0);
    }
    be.deregister_region(fr);
  }
}
