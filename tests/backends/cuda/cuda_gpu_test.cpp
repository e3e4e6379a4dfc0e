// Above 600 lines: one test file per backend feature set, GPU cases together so that they
// skip together without a GPU.
// CUDA backend tests on GPUs, through nixl::agent<nixl::cuda::backend>. Each case skips with
// the reason when the GPUs it needs are absent.

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include "cuda_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"

extern char** environ;

using nixl::mem_kind;
using nixl::status;
using nixl::xfer_op;
using nixl::cuda::backend;
using namespace cuda_test;

#define NEED_GPUS(n)                                                                            \
  do {                                                                                          \
    if (backend::device_count() < (n))                                                          \
      NIXL_SKIP("needs " << (n) << " GPU(s), this process sees " << backend::device_count()     \
                         << (backend::device_count() == 0                                       \
                                 ? std::string(": ") + std::string(backend::no_device_reason()) \
                                 : std::string()));                                             \
  } while (0)

namespace {

using nixl::test::code_of;

nixl::xfer_dlist one(mem_kind k, std::uintptr_t a, std::size_t n, std::uint64_t dev) {
  return nixl::xfer_dlist(k, {nixl::desc{a, n, dev}});
}

// Bytes [off, off+len) of a buffer filled with `seed` must now hold pattern `want` shifted so
// that byte i equals pattern(want, want_base + i); the byte before and after keep `seed`.
void verify(const gpu_buffer& b, std::uint32_t seed, std::size_t off, std::size_t len,
            std::uint32_t want, std::size_t want_base) {
  const std::size_t lo = off > 0 ? off - 1 : 0;
  const std::size_t hi = std::min(b.n, off + len + 1);
  auto v = b.download(lo, hi - lo);
  std::size_t bad = 0, first = SIZE_MAX;
  for (std::size_t i = lo; i < hi; ++i) {
    const std::uint8_t expect =
        (i >= off && i < off + len) ? pattern(want, want_base + (i - off)) : pattern(seed, i);
    if (v[i - lo] != expect) {
      ++bad;
      if (first == SIZE_MAX) first = i;
    }
  }
  INFO("len " << len << " off " << off << " first bad byte " << first);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("cuda gpu: one GPU, loopback, 1 B to 256 MiB, write and read", "[cuda][gpu]") {
  NEED_GPUS(1);
  const std::size_t cap = (256u << 20) + 4096;
  gpu_buffer src(cap, 0), dst(cap, 0);
  src.fill_pattern(1);
  dst.fill_pattern(2);
  agent a("g1");
  a.create_backend("CUDA");
  a.register_memory(reg(mem_kind::vram, src.addr(), cap, 0));
  a.register_memory(reg(mem_kind::vram, dst.addr(), cap, 0));
  for (std::size_t len :
       {std::size_t{1}, std::size_t{3}, std::size_t{4096}, std::size_t{65537},
        (std::size_t{1} << 20) + 5, std::size_t{16} << 20, std::size_t{256} << 20}) {
    const std::size_t so = len < (1u << 20) ? 7 : 0, doff = len < (1u << 20) ? 3 : 16;
    {
      auto req = a.create_request(xfer_op::write, one(mem_kind::vram, src.addr(so), len, 0),
                                  one(mem_kind::vram, dst.addr(doff), len, 0), "g1");
      CHECK(req.post() != status::invalid_param);
      REQUIRE(wait(req) == status::success);
      verify(dst, 2, doff, len, 1, so);
    }
    // restore and pull back the other way: READ local dst <- remote src
    std::vector<std::uint8_t> restore(len + 2);
    fill(restore, 2, doff - 1);
    dst.upload(restore, doff - 1);
    {
      auto req = a.create_request(xfer_op::read, one(mem_kind::vram, dst.addr(doff), len, 0),
                                  one(mem_kind::vram, src.addr(so), len, 0), "g1");
      req.post();
      REQUIRE(wait(req) == status::success);
      verify(dst, 2, doff, len, 1, so);
    }
    dst.upload(restore, doff - 1);
  }
}

namespace {
// `count` descriptors of random lengths (1 B .. 8 KiB, a few of 3 MiB), random source offsets,
// destinations packed with gaps. Returns the lists and checks the result.
void many_descriptors(agent& a, const std::string& target, gpu_buffer& src, gpu_buffer& dst,
                      std::size_t count, std::uint32_t seed, bool with_large) {
  std::mt19937_64 rng(seed);
  std::vector<nixl::desc> l, r;
  std::size_t at = 1;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t len = 1 + rng() % 8192;
    if (with_large && i % 16 == 5) len = 3u << 20;
    if (at + len + 1 > dst.n) break;
    const std::size_t so = rng() % (src.n - len);
    l.push_back({src.addr(so), len, static_cast<std::uint64_t>(src.dev)});
    r.push_back({dst.addr(at), len, static_cast<std::uint64_t>(dst.dev)});
    at += len + 1 + rng() % 3;
  }
  REQUIRE(l.size() == count);
  dst.fill_pattern(5);
  auto req = a.create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::vram, l),
                              nixl::xfer_dlist(mem_kind::vram, r), target);
  req.post();
  REQUIRE(wait(req) == status::success);
  auto got = dst.download(0, dst.n);
  std::vector<std::uint8_t> want(dst.n);
  fill(want, 5);
  for (std::size_t i = 0; i < l.size(); ++i) {
    const std::size_t so = l[i].addr - src.addr(), d = r[i].addr - dst.addr();
    for (std::size_t k = 0; k < l[i].len; ++k) want[d + k] = pattern(1, so + k);
  }
  std::size_t bad = 0, first = SIZE_MAX;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && bad++ == 0) first = i;
  INFO(count << " descriptors; first bad byte " << first);
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("cuda gpu: 1 to 4096 descriptors in one request, same GPU and across GPUs",
          "[cuda][gpu]") {
  NEED_GPUS(1);
  const int other = backend::device_count() > 1 ? 1 : 0;
  gpu_buffer src(64u << 20, 0), dst0(64u << 20, 0), dst1(64u << 20, other);
  src.fill_pattern(1);
  agent a("many");
  a.create_backend("CUDA");
  a.register_memory(reg(mem_kind::vram, src.addr(), src.n, 0));
  a.register_memory(reg(mem_kind::vram, dst0.addr(), dst0.n, 0));
  if (other != 0) a.register_memory(reg(mem_kind::vram, dst1.addr(), dst1.n, other));
  for (std::size_t count : {1, 2, 7, 64, 1000, 4096}) {
    many_descriptors(a, "many", src, dst0, count, 100 + count, false);
    if (other != 0) many_descriptors(a, "many", src, dst1, count, 200 + count, false);
  }
  many_descriptors(a, "many", src, dst0, 64, 7, true);
  if (other != 0) many_descriptors(a, "many", src, dst1, 64, 8, true);
}

TEST_CASE("cuda gpu: two GPUs, two agents, notification after the data", "[cuda][gpu]") {
  NEED_GPUS(2);
  const std::size_t n = 32u << 20;
  gpu_buffer b0(n, 0), b1(n, 1);
  b0.fill_pattern(1);
  b1.fill_pattern(2);
  agent a("A"), b("B");
  a.create_backend("CUDA");
  b.create_backend("CUDA");
  a.register_memory(reg(mem_kind::vram, b0.addr(), n, 0));
  b.register_memory(reg(mem_kind::vram, b1.addr(), n, 1));
  a.load_remote_metadata(b.local_metadata());
  for (int round = 0; round < 3; ++round) {
    const std::size_t len = round == 0 ? n : (round == 1 ? 4096 : 100000);
    auto req = a.create_request(xfer_op::write, one(mem_kind::vram, b0.addr(), len, 0),
                                one(mem_kind::vram, b1.addr(), len, 1), "B");
    const std::string tag = "done-" + std::to_string(round);
    req.post(tag);
    REQUIRE(wait(req) == status::success);
    REQUIRE(wait_notif(b, "A", tag));
    verify(b1, 2, 0, len, 1, 0);
    b1.fill_pattern(2);
  }
  // READ the other way: A pulls from B's GPU into its own
  b0.fill_pattern(3);
  auto rd = a.create_request(xfer_op::read, one(mem_kind::vram, b0.addr(8), 1u << 20, 0),
                             one(mem_kind::vram, b1.addr(16), 1u << 20, 1), "B");
  rd.post(std::string("read-done"));
  REQUIRE(wait(rd) == status::success);
  verify(b0, 3, 8, 1u << 20, 2, 16);
  CHECK(wait_notif(b, "A", "read-done"));
  // a request can be posted again
  rd.post();
  CHECK(wait(rd) == status::success);
}

TEST_CASE("cuda gpu: VRAM <-> DRAM, pinned here and pageable", "[cuda][gpu]") {
  NEED_GPUS(1);
  for (const char* pin : {"true", "false"}) {
    INFO("pin_dram=" << pin);
    const std::size_t n = 8u << 20;
    std::vector<std::uint8_t> host(n);
    fill(host, 9);
    gpu_buffer g(n, 0);
    g.fill_pattern(2);
    agent a("hd");
    a.create_backend("CUDA", {{"pin_dram", pin}});
    a.register_memory(reg(mem_kind::dram, reinterpret_cast<std::uintptr_t>(host.data()), n, 0));
    a.register_memory(reg(mem_kind::vram, g.addr(), n, 0));
    const auto h = reinterpret_cast<std::uintptr_t>(host.data());
    // DRAM -> VRAM, one big descriptor and 256 small ones
    auto w = a.create_request(xfer_op::write, one(mem_kind::dram, h + 1, n - 2, 0),
                              one(mem_kind::vram, g.addr(1), n - 2, 0), "hd");
    w.post();
    REQUIRE(wait(w) == status::success);
    verify(g, 2, 1, n - 2, 9, 1);
    std::vector<nixl::desc> l, r;
    for (std::size_t i = 0; i < 256; ++i) {
      l.push_back({h + i * 4096, 4096, 0});
      r.push_back({g.addr(i * 4096), 4096, 0});
    }
    // VRAM -> DRAM: local VRAM, remote (self) DRAM, after the GPU got new data
    g.fill_pattern(4);
    auto back = a.create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::vram, r),
                                 nixl::xfer_dlist(mem_kind::dram, l), "hd");
    back.post();
    REQUIRE(wait(back) == status::success);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < 256 * 4096; ++i) bad += host[i] != pattern(4, i);
    CHECK(bad == 0);
    // READ into DRAM from VRAM
    fill(host, 9);
    auto rd = a.create_request(xfer_op::read, one(mem_kind::dram, h, 12345, 0),
                               one(mem_kind::vram, g.addr(100), 12345, 0), "hd");
    rd.post();
    REQUIRE(wait(rd) == status::success);
    bad = 0;
    for (std::size_t i = 0; i < 12345; ++i) bad += host[i] != pattern(4, 100 + i);
    CHECK(bad == 0);
    CHECK(host[12345] == pattern(9, 12345));
  }
}

TEST_CASE("cuda gpu: sub-ranges of an allocation; descriptors outside regions are refused",
          "[cuda][gpu]") {
  NEED_GPUS(1);
  gpu_buffer big(16u << 20, 0), other(1u << 20, 0);
  big.fill_pattern(1);
  other.fill_pattern(2);
  agent a("sub");
  a.create_backend("CUDA");
  const std::size_t off = (1u << 20) + 256, len = 4u << 20;
  a.register_memory(reg(mem_kind::vram, big.addr(off), len, 0));
  a.register_memory(reg(mem_kind::vram, other.addr(), other.n, 0));
  // inside: fine
  auto ok = a.create_request(xfer_op::write, one(mem_kind::vram, big.addr(off + 10), 5000, 0),
                             one(mem_kind::vram, other.addr(), 5000, 0), "sub");
  ok.post();
  REQUIRE(wait(ok) == status::success);
  verify(other, 2, 0, 5000, 1, off + 10);
  // past the end of the region, before its start, in the unregistered rest, wrong GPU
  CHECK(code_of([&] {
          (void)a.create_request(xfer_op::write,
                                 one(mem_kind::vram, big.addr(off + len - 10), 20, 0),
                                 one(mem_kind::vram, other.addr(), 20, 0), "sub");
        }) == status::not_found);
  CHECK(code_of([&] {
          (void)a.create_request(xfer_op::write, one(mem_kind::vram, big.addr(off - 1), 2, 0),
                                 one(mem_kind::vram, other.addr(), 2, 0), "sub");
        }) == status::not_found);
  CHECK(code_of([&] {
          (void)a.create_request(xfer_op::write, one(mem_kind::vram, big.addr(0), 64, 0),
                                 one(mem_kind::vram, other.addr(), 64, 0), "sub");
        }) == status::not_found);
  CHECK(code_of([&] {
          (void)a.create_request(xfer_op::write, one(mem_kind::vram, big.addr(off), 64, 0),
                                 one(mem_kind::vram, other.addr(other.n - 32), 64, 0), "sub");
        }) == status::not_found);
  // registration past the allocation's end, or with the wrong GPU, is refused
  CHECK(code_of([&] {
          a.register_memory(reg(mem_kind::vram, big.addr(15u << 20), 2u << 20, 0));
        }) == status::invalid_param);
  CHECK(code_of([&] { a.register_memory(reg(mem_kind::vram, big.addr(), 4096, 99)); }) ==
        status::invalid_param);
  if (backend::device_count() > 1)
    CHECK(code_of([&] { a.register_memory(reg(mem_kind::vram, big.addr(), 4096, 1)); }) ==
          status::invalid_param);
  // host memory registered as VRAM
  std::vector<char> h(4096);
  CHECK(code_of([&] {
          a.register_memory(
              reg(mem_kind::vram, reinterpret_cast<std::uintptr_t>(h.data()), h.size(), 0));
        }) == status::invalid_param);
}

namespace {
struct child {
  pid_t pid = -1;
  int to = -1, from = -1;
  std::string buf;
  bool line(std::string& out, int timeout_ms = 60000) {
    for (;;) {
      auto nl = buf.find('\n');
      if (nl != std::string::npos) {
        out = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        return true;
      }
      pollfd p{from, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      char tmp[65536];
      const ssize_t n = ::read(from, tmp, sizeof(tmp));
      if (n <= 0) return false;
      buf.append(tmp, static_cast<std::size_t>(n));
    }
  }
  void say(const std::string& s) { (void)!::write(to, s.data(), s.size()); }
};

child spawn_peer(int dev, std::size_t len) {
  int in[2], out[2];
  REQUIRE(::pipe(in) == 0);
  REQUIRE(::pipe(out) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::string d = std::to_string(dev), l = std::to_string(len);
  char* argv[] = {const_cast<char*>(NIXL_CUDA_PEER_EXE), d.data(), l.data(), nullptr};
  child c;
  REQUIRE(posix_spawn(&c.pid, NIXL_CUDA_PEER_EXE, &fa, nullptr, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  c.to = in[1];
  c.from = out[0];
  return c;
}
}  // namespace

TEST_CASE("cuda gpu: two processes (CUDA IPC), sub-range target, notification", "[cuda][gpu]") {
  NEED_GPUS(1);
  const int peer_dev = backend::device_count() > 1 ? 1 : 0;
  const std::size_t len = 64u << 20;
  child c = spawn_peer(peer_dev, len);
  std::string line;
  REQUIRE(c.line(line));
  std::istringstream is(line);
  std::string word, md_hex;
  std::uintptr_t vaddr = 0, daddr = 0;
  std::size_t vlen = 0, dlen = 0, base = 0;
  std::uintptr_t alloc = 0;
  is >> word >> md_hex >> vaddr >> vlen >> base >> daddr >> dlen >> alloc;
  REQUIRE(word == "READY");
  REQUIRE(vlen == len);

  agent a("initiator");
  a.create_backend("CUDA");
  gpu_buffer mine(len, 0);
  mine.fill_pattern(3);
  std::vector<std::uint8_t> host(len / 2);
  fill(host, 22);
  a.register_memory(reg(mem_kind::vram, mine.addr(), len, 0));
  a.register_memory(
      reg(mem_kind::dram, reinterpret_cast<std::uintptr_t>(host.data()), host.size(), 0));
  CHECK(a.load_remote_metadata(from_hex(md_hex)) == "peer");

  // READ the peer's region (a sub-range of its allocation, `base` bytes in)
  auto rd = a.create_request(xfer_op::read, one(mem_kind::vram, mine.addr(), len, 0),
                             one(mem_kind::vram, vaddr, len, peer_dev), "peer");
  rd.post();
  REQUIRE(wait(rd) == status::success);
  verify(mine, 3, 0, len, 11, base);

  // the allocation's first 4 KiB, a second region mapped through the same IPC handle, read by
  // this agent and by a second agent of this process that comes and goes
  {
    gpu_buffer small(4096, 0);
    small.fill_pattern(4);
    mine.fill_pattern(3);
    auto head = a.create_request(xfer_op::read, one(mem_kind::vram, mine.addr(), 4096, 0),
                                 one(mem_kind::vram, alloc, 4096, peer_dev), "peer");
    head.post();
    REQUIRE(wait(head) == status::success);
    verify(mine, 3, 0, 4096, 11, 0);
    agent a2("initiator2");
    a2.create_backend("CUDA");
    a2.register_memory(reg(mem_kind::vram, small.addr(), 4096, 0));
    a2.load_remote_metadata(from_hex(md_hex));
    auto r2 = a2.create_request(xfer_op::read, one(mem_kind::vram, small.addr(), 4096, 0),
                                one(mem_kind::vram, vaddr + 8192, 4096, peer_dev), "peer");
    r2.post();
    REQUIRE(wait(r2) == status::success);
    verify(small, 4, 0, 4096, 11, base + 8192);
  }
  mine.fill_pattern(3);
  rd.post();  // the mappings of this agent outlived the second agent's
  REQUIRE(wait(rd) == status::success);
  verify(mine, 3, 0, len, 11, base);

  // the peer's DRAM cannot be reached from another process
  CHECK(code_of([&] {
          (void)a.create_request(xfer_op::write, one(mem_kind::vram, mine.addr(), 64, 0),
                                 one(mem_kind::dram, daddr, 64, 0), "peer");
        }) == status::not_supported);

  // WRITE pattern 22: first half from DRAM (one descriptor), second half from VRAM as 1024
  // descriptors, with the notification on the second request
  mine.fill_pattern(3);
  std::vector<std::uint8_t> second(len / 2);
  fill(second, 22, len / 2);
  mine.upload(second, len / 2);
  auto w1 = a.create_request(
      xfer_op::write,
      one(mem_kind::dram, reinterpret_cast<std::uintptr_t>(host.data()), len / 2, 0),
      one(mem_kind::vram, vaddr, len / 2, peer_dev), "peer");
  w1.post();
  REQUIRE(wait(w1) == status::success);
  std::vector<nixl::desc> l, r;
  const std::size_t piece = len / 2 / 1024;
  for (std::size_t i = 0; i < 1024; ++i) {
    l.push_back({mine.addr(len / 2 + i * piece), piece, 0});
    r.push_back({vaddr + len / 2 + i * piece, piece, static_cast<std::uint64_t>(peer_dev)});
  }
  nixl::xfer_options opt;
  opt.notif = "written";
  auto w2 = a.create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::vram, l),
                             nixl::xfer_dlist(mem_kind::vram, r), "peer", opt);
  w2.post();
  REQUIRE(wait(w2) == status::success);
  REQUIRE(c.line(line));
  CHECK(line == "RESULT ok");
  c.say("EXIT\n");
  int st = 0;
  ::waitpid(c.pid, &st, 0);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  // the peer is gone: its notification socket refuses
  CHECK(code_of([&] { a.notify("peer", "late"); }) == status::remote_disconnect);
  ::close(c.to);
  ::close(c.from);
}

TEST_CASE("cuda gpu: typed lists pick the CUDA backend at compile time", "[cuda][gpu]") {
  NEED_GPUS(1);
  gpu_buffer x(1u << 20, 0), y(1u << 20, backend::device_count() > 1 ? 1 : 0);
  x.fill_pattern(1);
  y.fill_pattern(2);
  agent a("typed");
  a.create_backend<backend>();
  a.register_memory(reg(mem_kind::vram, x.addr(), x.n, 0));
  a.register_memory(reg(mem_kind::vram, y.addr(), y.n, static_cast<std::uint64_t>(y.dev)));
  nixl::xfer_list<nixl::vram_t> l, r;
  for (std::size_t i = 0; i < 16; ++i) {
    l.push_back({x.addr(i * 8192), 4096, 0});
    r.push_back({y.addr(i * 8192), 4096, static_cast<std::uint64_t>(y.dev)});
  }
  auto req = a.create_request(xfer_op::write, l, r, "typed");
  STATIC_REQUIRE(std::is_same_v<decltype(req), nixl::request<backend>>);
  CHECK(req.post(std::string("typed-done")) != status::invalid_param);
  REQUIRE(wait(req) == status::success);
  CHECK(wait_notif(a, "typed", "typed-done"));
  auto got = y.download(0, 16 * 8192);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    bad += got[i] != ((i % 8192) < 4096 ? pattern(1, i) : pattern(2, i));
  CHECK(bad == 0);
}

TEST_CASE("cuda gpu: one request over two GPUs; a request released in flight completes first",
          "[cuda][gpu]") {
  NEED_GPUS(1);
  const int d1 = backend::device_count() > 1 ? 1 : 0;
  const std::size_t n = 8u << 20;
  gpu_buffer a0(n, 0), a1(n, d1), t(2 * n, 0);
  a0.fill_pattern(1);
  a1.fill_pattern(2);
  t.fill_pattern(3);
  agent a("lanes");
  a.create_backend("CUDA");
  a.register_memory(reg(mem_kind::vram, a0.addr(), n, 0));
  a.register_memory(reg(mem_kind::vram, a1.addr(), n, static_cast<std::uint64_t>(d1)));
  a.register_memory(reg(mem_kind::vram, t.addr(), 2 * n, 0));
  // local descriptors alternate between the GPUs (one lane each), small and large ones
  std::vector<nixl::desc> l, r;
  std::vector<std::uint32_t> seeds;
  std::size_t at = 0;
  for (std::size_t i = 0; i < 64; ++i) {
    const std::size_t len = i % 8 == 3 ? (2u << 20) : 65536;
    const std::size_t off = i * 65536;
    const gpu_buffer& src = i % 2 == 0 ? a0 : a1;
    if (off + len > n || at + len + 64 > t.n) continue;
    l.push_back({src.addr(off), len, static_cast<std::uint64_t>(src.dev)});
    r.push_back({t.addr(at), len, 0});
    at += len + 64;  // gaps: nothing merges
    seeds.push_back(i % 2 == 0 ? 1 : 2);
  }
  REQUIRE(l.size() > 32);
  {
    auto req = a.create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::vram, l),
                                nixl::xfer_dlist(mem_kind::vram, r), "lanes");
    req.post();
    // released while in flight: release waits for the copies before freeing their state
  }
  auto got = t.download(0, t.n);
  std::vector<std::uint8_t> want(t.n);
  fill(want, 3);
  for (std::size_t i = 0; i < l.size(); ++i) {
    const std::size_t so = l[i].addr - (seeds[i] == 1 ? a0.addr() : a1.addr());
    for (std::size_t k = 0; k < l[i].len; ++k)
      want[r[i].addr - t.addr() + k] = pattern(seeds[i], so + k);
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  CHECK(bad == 0);
}

TEST_CASE("cuda gpu: a request with a notification released in flight sends an abort notice",
          "[cuda][gpu]") {
  NEED_GPUS(1);
  const std::size_t n = std::size_t{512} << 20;  // long enough to be in flight after post
  gpu_buffer src(n, 0), dst(n, 0);
  src.fill_pattern(4);
  agent a("early");
  a.create_backend("CUDA");
  a.register_memory(reg(mem_kind::vram, src.addr(), n, 0));
  a.register_memory(reg(mem_kind::vram, dst.addr(), n, 0));
  {
    auto req =
        a.create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::vram, {{src.addr(), n, 0}}),
                         nixl::xfer_dlist(mem_kind::vram, {{dst.addr(), n, 0}}), "early",
                         {.notif = "released-early"});
    REQUIRE(req.post() == status::in_progress);
    CHECK(req.release() == status::success);  // waits for the copy, then the notice goes
  }
  nixl::notif_map aborts, notifs;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (aborts["early"].empty() && std::chrono::steady_clock::now() < end)
    a.aborted_notifications(aborts);
  CHECK(aborts["early"] == std::vector<std::string>{"released-early"});
  a.notifications(notifs);
  CHECK(notifs["early"].empty());                   // never the notification as well
  CHECK(dst.download(0, n) == src.download(0, n));  // the data landed before the notice
}

TEST_CASE("cuda gpu: requests made and posted from several threads (rw mode)", "[cuda][gpu]") {
  NEED_GPUS(1);
  const int d1 = backend::device_count() > 1 ? 1 : 0;
  const std::size_t n = 16u << 20, threads = 4, slice = n / threads;
  gpu_buffer src(n, 0), dst(n, d1);
  src.fill_pattern(1);
  dst.fill_pattern(2);
  nixl::agent_config cfg;
  cfg.sync = nixl::thread_sync::rw;
  agent a("mt", cfg);
  a.create_backend("CUDA");
  a.register_memory(reg(mem_kind::vram, src.addr(), n, 0));
  a.register_memory(reg(mem_kind::vram, dst.addr(), n, static_cast<std::uint64_t>(d1)));
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        // thread t: 64 small descriptors and one large one inside its slice
        std::vector<nixl::desc> l, r;
        const std::size_t base = t * slice;
        for (std::size_t i = 0; i < 64; ++i) {
          l.push_back({src.addr(base + i * 8192), 4096, 0});
          r.push_back({dst.addr(base + i * 8192), 4096, static_cast<std::uint64_t>(d1)});
        }
        l.push_back({src.addr(base + slice / 2), slice / 2, 0});
        r.push_back({dst.addr(base + slice / 2), slice / 2, static_cast<std::uint64_t>(d1)});
        for (int rep = 0; rep < 20; ++rep) {
          auto req = a.create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::vram, l),
                                      nixl::xfer_dlist(mem_kind::vram, r), "mt");
          for (int k = 0; k < 5; ++k) {
            req.post();
            if (wait(req) != status::success) ++failures;
          }
        }
      } catch (...) {
        ++failures;
      }
    });
  for (auto& th : pool) th.join();
  CHECK(failures.load() == 0);
  auto got = dst.download(0, n);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t in_slice = i % slice;
    const bool written =
        in_slice >= slice / 2 || (in_slice < 64 * 8192 && (in_slice % 8192) < 4096);
    bad += got[i] != (written ? pattern(1, i) : pattern(2, i));
  }
  CHECK(bad == 0);
}

TEST_CASE("cuda gpu: DRAM pinned once for every agent of the process", "[cuda][gpu]") {
  NEED_GPUS(1);
  const std::size_t n = 4u << 20;
  std::vector<std::uint8_t> host(n);
  fill(host, 6);
  const auto h = reinterpret_cast<std::uintptr_t>(host.data());
  gpu_buffer g(n, 0);
  auto pinned = [&] {
    cudaPointerAttributes at{};
    must(cudaPointerGetAttributes(&at, host.data()), "cudaPointerGetAttributes");
    return at.type == cudaMemoryTypeHost;
  };
  CHECK_FALSE(pinned());
  auto x = std::make_unique<agent>("pinX");
  agent y("pinY"), z("pinZ");
  for (agent* a : {x.get(), &y, &z}) a->create_backend("CUDA");
  x->register_memory(reg(mem_kind::dram, h, n, 0));
  y.register_memory(reg(mem_kind::dram, h, n, 0));             // same range: shares the pin
  z.register_memory(reg(mem_kind::dram, h + 4096, n / 2, 0));  // overlaps: copy engines only
  for (agent* a : {&y, &z}) a->register_memory(reg(mem_kind::vram, g.addr(), n, 0));
  CHECK(pinned());
  x.reset();  // x deregisters; y still holds the pin
  CHECK(pinned());
  for (agent* a : {&y, &z}) {
    g.fill_pattern(2);
    std::vector<nixl::desc> l, r;
    for (std::size_t i = 0; i < 256; ++i) {
      l.push_back({h + 4096 + i * 4096, 4096, 0});
      r.push_back({g.addr(i * 4096), 4096, 0});
    }
    auto req = a->create_request(xfer_op::write, nixl::xfer_dlist(mem_kind::dram, l),
                                 nixl::xfer_dlist(mem_kind::vram, r), a->name());
    req.post();
    REQUIRE(wait(req) == status::success);
    verify(g, 2, 0, 256 * 4096, 6, 4096);
  }
  y.deregister_memory(reg(mem_kind::dram, h, n, 0));
  CHECK_FALSE(pinned());
}
