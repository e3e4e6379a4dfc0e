// POSIX backend: the engines through the backend contract: parameters, engine choice and
// fallback, short transfers, queues of every depth, I/O errors.

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
#include "nixl_test/small_fs.hpp"
#include "posix_test_support.hpp"

using namespace posix_test;

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
      dst.set(std::byte{0});
      {
        direct_rig rig(engine_params(e), src, f.fd);
        REQUIRE(rig.run(nixl::xfer_op::write, src, scattered(count, len)) == nixl::status::success);
      }
      {
        direct_rig rig(engine_params(e), dst, f.fd);
        REQUIRE(rig.run(nixl::xfer_op::read, dst, scattered(count, len)) == nixl::status::success);
      }
      REQUIRE(std::memcmp(src.data(), dst.data(), src.size()) == 0);
    }
  }
}

TEST_CASE("posix: io_uring leaves a large page-cache read to the kernel's workers", "[posix]") {
  // A buffered read of cached pages is copied inside io_uring_enter unless it is marked async:
  // a post of 64 MiB then returned with the data copied (`success`) after milliseconds. Now
  // at most 256 KiB per pass are copied inline, so the post returns `in_progress` (a post preempted
  // for the whole copy between its submit and its reap could still see the end: five tries).
  scratch tmp;
  fd_guard f(::open((tmp / "cached").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  constexpr std::size_t len = std::size_t{64} << 20;
  buffer src(len), dst(len);
  src.fill(91);
  direct_rig w(engine_params("URING"), src, f.fd);
  if (w.b.engine_name() != "URING") {
    NIXL_SKIP("io_uring cannot start here: " << w.b.engine_name() << " in use");
  }
  REQUIRE(w.run(nixl::xfer_op::write, src, {{0, 0, len}}) == nixl::status::success);
  direct_rig r(engine_params("URING"), dst, f.fd);
  int in_flight = 0;
  for (int i = 0; i < 5 && in_flight == 0; ++i) {
    dst.set(std::byte{0});
    backend::request q;
    r.prepare(q, nixl::xfer_op::read, dst, {{0, 0, len}});
    const nixl::status s = r.b.post(q, std::nullopt);
    if (s == nixl::status::in_progress) ++in_flight;
    REQUIRE(wait(r.b, q, s) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), len) == 0);
    CHECK(r.b.release(q) == nixl::status::success);
  }
  CHECK(in_flight == 1);
  // posted by a thread that exits at once: io_uring cancels the work its workers hold for that
  // thread and have not started (64 reads, more than it runs at once), and the engine hands
  // those reads over again from the thread that checks
  dst.set(std::byte{0});
  backend::request q;
  std::vector<piece> mib;
  for (std::size_t i = 0; i < 64; ++i) mib.push_back({i << 20, i << 20, std::size_t{1} << 20});
  r.prepare(q, nixl::xfer_op::read, dst, mib);
  nixl::status posted = nixl::status::invalid_param;
  std::thread([&] { posted = r.b.post(q, std::nullopt); }).join();
  CHECK(wait(r.b, q, posted) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), len) == 0);
  CHECK(r.b.release(q) == nixl::status::success);
  // a small read after it
  backend::request small;
  r.prepare(small, nixl::xfer_op::read, dst, {{0, 0, 4096}});
  CHECK(wait(r.b, small, r.b.post(small, std::nullopt)) == nixl::status::success);
  CHECK(r.b.release(small) == nixl::status::success);
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
    auto ma = be.register_region(nixl::mem_kind::dram, {{a.addr(), a.size(), 0}, ""});
    auto mb = be.register_region(nixl::mem_kind::dram, {{b2.addr(), b2.size(), 0}, ""});
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
    CHECK(std::memcmp(back.data(), b2.data(), back.size()) == 0);
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
      REQUIRE(::pwrite(f.fd, buf.data(), 6000, 0) == 6000);
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

TEST_CASE("posix: a file system that fills ends the WRITE with an error; the backend goes on",
          "[posix]") {
  const std::string e = GENERATE("URING", "AIO", "POSIX", "POSIX-inline");
  DYNAMIC_SECTION(e) {
    small_fs fs(small_fs::type::tmpfs, 1 << 20);
    NIXL_REQUIRE_MOUNT(fs);
    fd_guard f(::open((fs / "data").c_str(), O_RDWR | O_CREAT, 0600));
    const std::size_t part = 256 << 10, big = 2 << 20;
    buffer buf(part + big), back(2 * part);
    buf.fill(5);
    direct_rig rig(engine_params(e), buf, f.fd);
    REQUIRE(rig.run(nixl::xfer_op::write, buf, {{0, 0, part}}) == nixl::status::success);
    // Larger than what is free: an error, not success after a short write, and within the wait.
    CHECK(rig.run(nixl::xfer_op::write, buf, {{part, part, big}}) == nixl::status::backend);
    // What was written before is intact.
    direct_rig rd(engine_params(e), back, f.fd);
    REQUIRE(rd.run(nixl::xfer_op::read, back, {{0, 0, part}}) == nixl::status::success);
    CHECK(back.holds(5, 0, part, 0));
    // The partial tail dropped, a WRITE that fits succeeds on the same backend and reads back.
    REQUIRE(::ftruncate(f.fd, static_cast<off_t>(part)) == 0);
    CHECK(rig.run(nixl::xfer_op::write, buf, {{part, part, part}}) == nixl::status::success);
    back.set(std::byte{0});
    REQUIRE(rd.run(nixl::xfer_op::read, back, {{0, 0, 2 * part}}) == nixl::status::success);
    CHECK(back.holds(5, 0, 2 * part, 0));
  }
}
