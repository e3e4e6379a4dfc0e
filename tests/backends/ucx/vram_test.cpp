// The UCX backend with GPU memory: registration, WRITE and READ between GPUs in one process and
// across two processes (the target is nixl_ucx_peer --vram), VRAM <-> DRAM, notifications after
// the data, 1 and 1000 descriptors. Needs a UCX with CUDA support (its memory types include
// CUDA) and a GPU; each case skips with the reason otherwise. A second GPU is used when present
// (GPU 0 <-> GPU 1); with one, both sides are on GPU 0.

#include <algorithm>

#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include "nixl_test/catch.hpp"
#include "ucx_support.hpp"

#if defined(NIXL_UCX_TEST_CUDA)
#include "cuda_support.hpp"

using nixl::mem_kind;
using nixl::status;
using nixl::xfer_op;
using ucx_test::peer_process;
using ucx_agent = nixl::agent<nixl::ucx::backend>;

namespace {

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// Why VRAM over UCX cannot be tested in this process; empty when it can.
std::string vram_skip_reason() {
  if (NIXL_UCX_WITH_CUDA == 0)
    return "built against a UCX without CUDA transports (NIXL_UCX_WITH_CUDA=0); configure "
           "with a UCX built --with-cuda (scripts/build-ucx.sh)";
  if (gpu_count() == 0) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError();
    return std::string("no GPU: ") + cudaGetErrorString(e);
  }
  ucx_agent probe("vram-probe");
  probe.create_backend<nixl::ucx::backend>();
  if (!probe.get_backend<nixl::ucx::backend>().cuda_supported())
    return "the UCX library reports no CUDA memory type (is its libuct_cuda module loadable?)";
  return {};
}

#define NEED_UCX_VRAM()                          \
  do {                                           \
    const std::string why_ = vram_skip_reason(); \
    if (!why_.empty()) NIXL_SKIP(why_);          \
  } while (0)

int second_gpu() {
  return gpu_count() > 1 ? 1 : 0;
}

nixl::xfer_dlist blocks(mem_kind k, std::uintptr_t base, std::size_t n, std::size_t len,
                        std::size_t stride, int dev) {
  return nixl::strided_dlist(k, {{base, len, static_cast<std::uint64_t>(dev), stride, n}}).expand();
}

using nixl::test::wait;

/// Waits until `a` holds a notification `msg` from `from`; nothing else polls meanwhile.
bool wait_notif(ucx_agent& a, const std::string& from, const std::string& msg) {
  nixl::notif_map m;
  return ucx_test::wait_done([&] {
           a.notifications(m);
           for (const auto& x : m[from])
             if (x == msg) return status::success;
           std::this_thread::sleep_for(std::chrono::microseconds(50));
           return status::in_progress;
         }) == status::success;
}

/// `n` blocks of `len` bytes, `stride` apart, of a buffer filled with `seed` (cuda_test pattern).
std::vector<std::uint8_t> expected_blocks(std::uint32_t seed, std::size_t n, std::size_t len,
                                          std::size_t stride) {
  std::vector<std::uint8_t> v(n * len);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < len; ++k) v[i * len + k] = cuda_test::pattern(seed, i * stride + k);
  return v;
}

std::vector<std::uint8_t> gather(const cuda_test::gpu_buffer& b, std::size_t n, std::size_t len,
                                 std::size_t stride) {
  auto all = b.download(0, (n - 1) * stride + len);
  std::vector<std::uint8_t> v(n * len);
  for (std::size_t i = 0; i < n; ++i) std::memcpy(v.data() + i * len, all.data() + i * stride, len);
  return v;
}

/// True when the `nb` blocks of `bl` bytes at `p` hold pattern `seed` as it stands every `gap`
/// bytes (block i from offset i * gap).
template <class Byte>
bool holds_blocks(const Byte* p, std::size_t nb, std::size_t bl, std::size_t gap, unsigned seed) {
  for (std::size_t i = 0; i < nb; ++i)
    for (std::size_t k = 0; k < bl; ++k)
      if (static_cast<std::uint8_t>(p[i * bl + k]) !=
          static_cast<std::uint8_t>(ucx_test::buffer::pattern(i * gap + k, seed)))
        return false;
  return true;
}

/// Posts the WRITE `w` of `len` bytes to the start of peer `t`'s region and checks what `t`
/// gets: one notification `notif`, then bytes summing as those at `data`; `w` completes.
template <class Request>
void post_and_check(peer_process& t, Request& w, const std::string& notif, const void* data,
                    std::size_t len) {
  (void)w.post();
  const auto n = ucx_test::target_notifs(t, 1);
  REQUIRE(n.size() == 1);
  CHECK(n[0].second == notif);
  CHECK(t.ask(ucx_test::sum_cmd(0, len)) == ucx_test::sum_of(data, len));
  REQUIRE(wait(w) == status::success);
}

struct vram_pair {
  static constexpr std::size_t size = std::size_t{64} << 20;
  cuda_test::gpu_buffer src{size, 0};
  cuda_test::gpu_buffer dst{size, second_gpu()};
  ucx_agent ini{"ini"};
  ucx_agent tgt{"tgt"};
  explicit vram_pair(const nixl::params& ini_params = {}) {
    ini.create_backend<nixl::ucx::backend>(ini_params);
    tgt.create_backend<nixl::ucx::backend>();
    ini.register_memory(cuda_test::reg(mem_kind::vram, src.addr(), size, src.dev));
    tgt.register_memory(cuda_test::reg(mem_kind::vram, dst.addr(), size, dst.dev));
    REQUIRE(ini.load_remote_metadata(tgt.local_metadata()) == "tgt");
    src.fill_pattern(1);
    dst.fill_pattern(2);
  }
};

}  // namespace

/// VRAM of GPU 0 here and the host memory of a peer process (`size` bytes; `alloc`: from its
/// backend::allocate, else its heap): an initiator with its UCX backend, its VRAM registered,
/// the peer's metadata loaded.
struct vram_and_peer_host {
  peer_process t;
  cuda_test::gpu_buffer mine;
  ucx_agent in{"initiator"};
  std::uintptr_t ta = 0;  ///< the peer's buffer
  vram_and_peer_host(std::size_t size, bool alloc)
      : t(NIXL_UCX_PEER_EXE,
          alloc ? std::vector<std::string>{"target", std::to_string(size), "--alloc"}
                : std::vector<std::string>{"target", std::to_string(size)}),
        mine(size, 0) {
    in.create_backend<nixl::ucx::backend>();
    in.register_memory(cuda_test::reg(mem_kind::vram, mine.addr(), size, 0));
    REQUIRE(in.load_remote_metadata(t.metadata()) == "target");
    ta = t.remote_addr();
  }
  /// Fills the VRAM with pattern `seed` and returns it.
  std::vector<std::uint8_t> upload(std::uint32_t seed) {
    std::vector<std::uint8_t> pat(mine.n);
    cuda_test::fill(pat, seed);
    mine.upload(pat);
    return pat;
  }
};

TEST_CASE("ucx vram: registration, metadata and refusal of bad ranges", "[ucx][vram]") {
  NEED_UCX_VRAM();
  for (int dev = 0; dev < std::min(gpu_count(), 2); ++dev) {
    CAPTURE(dev);
    cuda_test::gpu_buffer b(std::size_t{4} << 20, dev);
    ucx_agent a("reg");
    a.create_backend<nixl::ucx::backend>();
    const auto whole = cuda_test::reg(mem_kind::vram, b.addr(), b.n, dev);
    const auto part = cuda_test::reg(mem_kind::vram, b.addr(1 << 20), 4096, dev);
    a.register_memory(whole);
    a.register_memory(part);  // a tensor inside a larger allocation
    const std::string md = a.local_metadata();
    ucx_agent peer("reg-peer");
    peer.create_backend<nixl::ucx::backend>();
    REQUIRE(peer.load_remote_metadata(md) == "reg");
    CHECK(peer.check_remote_metadata(
        "reg", nixl::xfer_dlist(mem_kind::vram, {nixl::desc{b.addr(1 << 20), 4096,
                                                            static_cast<std::uint64_t>(dev)}})));
    // outside every registered range of the peer
    CHECK_FALSE(peer.check_remote_metadata(
        "reg", nixl::xfer_dlist(mem_kind::vram, {nixl::desc{b.addr(b.n - 8), 64,
                                                            static_cast<std::uint64_t>(dev)}})));
    a.deregister_memory(part);
    a.deregister_memory(whole);
  }
}

TEST_CASE("ucx vram: one process, GPU 0 <-> GPU 1, 1 and 1000 descriptors, notifications",
          "[ucx][vram]") {
  NEED_UCX_VRAM();
  vram_pair p;
  INFO("GPU 0 -> GPU " << p.dst.dev);
  // one 64 MiB WRITE: when the notification is seen, the data is there
  auto w = p.ini.create_request(
      xfer_op::write, blocks(mem_kind::vram, p.src.addr(), 1, p.size, 0, 0),
      blocks(mem_kind::vram, p.dst.addr(), 1, p.size, 0, p.dst.dev), "tgt", {.notif = "big"});
  const status s = w.post();
  REQUIRE((s == status::success || s == status::in_progress));
  REQUIRE(wait_notif(p.tgt, "ini", "big"));
  CHECK(p.dst.download(0, p.size) == expected_blocks(1, 1, p.size, 0));
  REQUIRE(wait(w) == status::success);

  // 1000 descriptors of 1 KiB into a strided layout, then READ them back into another place
  p.dst.fill_pattern(2);
  auto w2 = p.ini.create_request(
      xfer_op::write, blocks(mem_kind::vram, p.src.addr(), 1000, 1024, 1024, 0),
      blocks(mem_kind::vram, p.dst.addr(), 1000, 1024, 2048, p.dst.dev), "tgt", {.notif = "many"});
  (void)w2.post();
  REQUIRE(wait_notif(p.tgt, "ini", "many"));
  CHECK(gather(p.dst, 1000, 1024, 2048) == expected_blocks(1, 1000, 1024, 1024));
  REQUIRE(wait(w2) == status::success);

  p.dst.fill_pattern(3);
  auto r = p.ini.create_request(
      xfer_op::read, blocks(mem_kind::vram, p.src.addr(), 1000, 1024, 1024, 0),
      blocks(mem_kind::vram, p.dst.addr(), 1000, 1024, 2048, p.dst.dev), "tgt");
  (void)r.post();
  REQUIRE(wait(r) == status::success);
  CHECK(gather(p.src, 1000, 1024, 1024) == expected_blocks(3, 1000, 1024, 2048));

  // READ of one odd-sized, misaligned descriptor
  auto one =
      p.ini.create_request(xfer_op::read, blocks(mem_kind::vram, p.src.addr(5), 1, 12345, 0, 0),
                           blocks(mem_kind::vram, p.dst.addr(7), 1, 12345, 0, p.dst.dev), "tgt");
  (void)one.post();
  REQUIRE(wait(one) == status::success);
  auto got = p.src.download(5, 12345);
  std::vector<std::uint8_t> want(12345);
  cuda_test::fill(want, 3, 7);
  CHECK(got == want);
}

TEST_CASE("ucx vram: VRAM <-> DRAM in one process", "[ucx][vram]") {
  NEED_UCX_VRAM();
  // cuda: the driver copies (pinned host memory); ucx: UCX's protocols (host staging)
  const std::string mode = GENERATE(std::string("cuda"), std::string("ucx"));
  INFO("host_vram_copy=" << mode);
  vram_pair p({{"host_vram_copy", mode}});
  const std::size_t n = std::size_t{16} << 20;
  ucx_test::buffer host(n);
  p.ini.register_memory(cuda_test::reg(mem_kind::dram, host.addr(), n, 0));
  std::vector<std::uint8_t> pat(n);
  cuda_test::fill(pat, 9);
  std::memcpy(host.data(), pat.data(), n);
  // local DRAM -> remote VRAM
  auto w = p.ini.create_request(xfer_op::write, blocks(mem_kind::dram, host.addr(), 1, n, 0, 0),
                                blocks(mem_kind::vram, p.dst.addr(), 1, n, 0, p.dst.dev), "tgt",
                                {.notif = "h2d"});
  (void)w.post();
  REQUIRE(wait(w) == status::success);
  REQUIRE(wait_notif(p.tgt, "ini", "h2d"));
  CHECK(p.dst.download(0, n) == pat);
  // remote VRAM -> local DRAM, 1000 descriptors
  std::memset(host.data(), 0, n);
  auto r = p.ini.create_request(
      xfer_op::read, blocks(mem_kind::dram, host.addr(), 1000, 1024, 1024, 0),
      blocks(mem_kind::vram, p.dst.addr(), 1000, 1024, 2048, p.dst.dev), "tgt");
  (void)r.post();
  REQUIRE(wait(r) == status::success);
  std::vector<std::uint8_t> back(host.size());
  std::memcpy(back.data(), host.data(), back.size());
  back.resize(1000 * 1024);
  std::vector<std::uint8_t> want(1000 * 1024);
  for (std::size_t i = 0; i < 1000; ++i)
    std::memcpy(want.data() + i * 1024, pat.data() + i * 2048, 1024);
  CHECK(back == want);
  // local VRAM -> remote DRAM
  ucx_test::buffer remote_host(n);
  p.tgt.register_memory(cuda_test::reg(mem_kind::dram, remote_host.addr(), n, 0));
  p.ini.load_remote_metadata(p.tgt.local_metadata());
  auto w3 = p.ini.create_request(xfer_op::write, blocks(mem_kind::vram, p.src.addr(), 1, n, 0, 0),
                                 blocks(mem_kind::dram, remote_host.addr(), 1, n, 0, 0), "tgt",
                                 {.notif = "d2h"});
  (void)w3.post();
  REQUIRE(wait_notif(p.tgt, "ini", "d2h"));
  std::vector<std::uint8_t> got(n);
  std::memcpy(got.data(), remote_host.data(), n);
  CHECK(got == expected_blocks(1, 1, n, 0));
  REQUIRE(wait(w3) == status::success);
}

// host_vram_copy=cuda: post issues the driver's copies and returns; requests overlap, each
// ends with its data in place and its notification after it, and a release in flight waits
// for the copies (they cannot be taken back), so the bytes are in place when it returns.
TEST_CASE("ucx vram: driver copies in flight: four requests at once, release in flight",
          "[ucx][vram]") {
  NEED_UCX_VRAM();
  vram_pair p(nixl::params{{"host_vram_copy", "cuda"}});
  constexpr std::size_t k = 4, part = std::size_t{16} << 20, n = k * part;
  static_assert(n <= vram_pair::size);
  ucx_test::buffer host(n);
  p.ini.register_memory(cuda_test::reg(mem_kind::dram, host.addr(), n, 0));
  std::vector<std::uint8_t> pat(n);
  cuda_test::fill(pat, 11);
  std::memcpy(host.data(), pat.data(), n);
  std::vector<ucx_agent::xfer_request> rs;
  for (std::size_t i = 0; i < k; ++i)
    rs.push_back(p.ini.create_request(
        xfer_op::write, blocks(mem_kind::dram, host.addr() + i * part, 1, part, 0, 0),
        blocks(mem_kind::vram, p.dst.addr() + i * part, 1, part, 0, p.dst.dev), "tgt",
        {.notif = "part-" + std::to_string(i)}));
  for (auto& r : rs) {
    const status st = r.post();
    REQUIRE((st == status::in_progress || st == status::success));
  }
  for (auto& r : rs) REQUIRE(wait(r) == status::success);
  nixl::notif_map seen;  // every notification, in any order
  REQUIRE(ucx_test::wait_done([&] {
            p.tgt.notifications(seen);
            if (seen["ini"].size() >= k) return status::success;
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            return status::in_progress;
          }) == status::success);
  auto got = seen["ini"];
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::string>{"part-0", "part-1", "part-2", "part-3"});
  CHECK(p.dst.download(0, n) == pat);
  // released while the driver copies run: when release returns they are done
  cuda_test::fill(pat, 12);
  std::memcpy(host.data(), pat.data(), n);
  auto w = p.ini.create_request(xfer_op::write, blocks(mem_kind::dram, host.addr(), 1, n, 0, 0),
                                blocks(mem_kind::vram, p.dst.addr(), 1, n, 0, p.dst.dev), "tgt",
                                {.notif = "released"});
  (void)w.post();
  CHECK(w.release() == status::success);
  CHECK(p.dst.download(0, n) == pat);
}

TEST_CASE("ucx vram: two processes, GPU 0 -> GPU 1, WRITE and READ, notifications", "[ucx][vram]") {
  NEED_UCX_VRAM();
  // host_vram_copy only changes how this process's DRAM meets the peer's VRAM (the last steps)
  const std::string mode = GENERATE(std::string("cuda"), std::string("ucx"));
  INFO("host_vram_copy=" << mode);
  const std::size_t size = std::size_t{64} << 20;
  const int peer_gpu = second_gpu();
  peer_process t(NIXL_UCX_PEER_EXE,
                 {"target", std::to_string(size), "--vram=" + std::to_string(peer_gpu)});
  cuda_test::gpu_buffer mine(size, 0);
  ucx_test::buffer host(std::size_t{1} << 20);
  ucx_agent in("initiator");
  in.create_backend<nixl::ucx::backend>({{"host_vram_copy", mode}});
  in.register_memory(cuda_test::reg(mem_kind::vram, mine.addr(), size, 0));
  in.register_memory(cuda_test::reg(mem_kind::dram, host.addr(), host.size(), 0));
  REQUIRE(in.load_remote_metadata(t.metadata()) == "target");
  const std::uintptr_t ta = t.remote_addr();
  INFO("GPU 0 -> GPU " << peer_gpu << " of another process");

  // one 64 MiB WRITE with a notification; the peer checks its memory after the notification
  std::vector<std::uint8_t> pat(size);
  cuda_test::fill(pat, 4);
  mine.upload(pat);
  auto w = in.create_request(xfer_op::write, blocks(mem_kind::vram, mine.addr(), 1, size, 0, 0),
                             blocks(mem_kind::vram, ta, 1, size, 0, peer_gpu), "target",
                             {.notif = "big"});
  (void)w.post();
  auto n = ucx_test::target_notifs(t, 1);
  REQUIRE(n.size() == 1);
  CHECK(n[0] == std::pair<std::string, std::string>{"initiator", "big"});
  CHECK(t.ask(ucx_test::sum_cmd(0, size)) == ucx_test::sum_of(pat.data(), size));
  REQUIRE(wait(w) == status::success);

  // 1000 descriptors of 1 KiB into a strided layout
  auto w2 = in.create_request(
      xfer_op::write, blocks(mem_kind::vram, mine.addr(), 1000, 1024, 1024, 0),
      blocks(mem_kind::vram, ta, 1000, 1024, 2048, peer_gpu), "target", {.notif = "many"});
  REQUIRE(t.ask(fmt::format("FILL 0 {} 5", 2048 * 1000)) == "OK");
  (void)w2.post();
  n = ucx_test::target_notifs(t, 1);
  REQUIRE(n.size() == 1);
  CHECK(n[0].second == "many");
  for (std::size_t i : {std::size_t{0}, std::size_t{499}, std::size_t{999}})
    CHECK(t.ask(ucx_test::sum_cmd(i * 2048, 1024)) ==
          ucx_test::sum_of(pat.data() + i * 1024, 1024));
  REQUIRE(wait(w2) == status::success);

  // READ the peer's pattern back into GPU 0, 1000 descriptors
  REQUIRE(t.ask(fmt::format("FILL 0 {} 9", 2048 * 1000)) == "OK");
  auto r =
      in.create_request(xfer_op::read, blocks(mem_kind::vram, mine.addr(), 1000, 1024, 1024, 0),
                        blocks(mem_kind::vram, ta, 1000, 1024, 2048, peer_gpu), "target");
  (void)r.post();
  REQUIRE(wait(r) == status::success);
  auto got = mine.download(0, 1000 * 1024);
  CHECK(holds_blocks(got.data(), 1000, 1024, 2048, 9));

  // host memory of this process -> the peer's VRAM
  host.fill(6);
  auto h = in.create_request(
      xfer_op::write, blocks(mem_kind::dram, host.addr(), 1, host.size(), 0, 0),
      blocks(mem_kind::vram, ta + 4096, 1, host.size(), 0, peer_gpu), "target", {.notif = "host"});
  // cuda: the driver copies the pair (the peer's VRAM mapped here); ucx: UCX moves it
  REQUIRE(h.get_if<nixl::ucx::backend>() != nullptr);
  CHECK(h.get_if<nixl::ucx::backend>()->backend_state().gpu_copies() == (mode == "cuda" ? 1 : 0));
  (void)h.post();
  n = ucx_test::target_notifs(t, 1);
  REQUIRE(n.size() == 1);
  CHECK(t.ask(ucx_test::sum_cmd(4096, host.size())) == ucx_test::sum_of(host.data(), host.size()));
  REQUIRE(wait(h) == status::success);

  // the peer's VRAM -> host memory of this process, 64 descriptors of 16 KiB, strided there
  REQUIRE(t.ask(fmt::format("FILL 0 {} 11", 2 * host.size())) == "OK");
  std::memset(host.data(), 0, host.size());
  const std::size_t nb = 64, bl = std::size_t{16} << 10;
  auto hr = in.create_request(xfer_op::read, blocks(mem_kind::dram, host.addr(), nb, bl, bl, 0),
                              blocks(mem_kind::vram, ta, nb, bl, 2 * bl, peer_gpu), "target");
  (void)hr.post();
  REQUIRE(wait(hr) == status::success);
  CHECK(holds_blocks(host.data(), nb, bl, 2 * bl, 11));
}

// Host memory here and the peer's VRAM where UCX has no cuda_ipc lane to map it (here: UCX_TLS
// without cuda_ipc in this process): the driver copies through the CUDA IPC handle the peer
// exported with its region.
TEST_CASE("ucx vram: two processes, host memory <-> the peer's VRAM through its CUDA IPC export",
          "[ucx][vram]") {
  NEED_UCX_VRAM();
  const std::size_t size = std::size_t{4} << 20;
  peer_process t(NIXL_UCX_PEER_EXE, {"target", std::to_string(size), "--vram=0"});
  ucx_test::buffer host(size);
  ucx_agent in("initiator");
  in.create_backend<nixl::ucx::backend>({{"engine_config", "UCX_TLS=^cuda_ipc"}});
  in.register_memory(cuda_test::reg(mem_kind::dram, host.addr(), host.size(), 0));
  REQUIRE(in.load_remote_metadata(t.metadata()) == "target");
  const std::uintptr_t ta = t.remote_addr();
  host.fill(21);
  auto w = in.create_request(xfer_op::write, blocks(mem_kind::dram, host.addr(), 1, size, 0, 0),
                             blocks(mem_kind::vram, ta, 1, size, 0, 0), "target", {.notif = "ipc"});
  REQUIRE(w.get_if<nixl::ucx::backend>() != nullptr);
  CHECK(w.get_if<nixl::ucx::backend>()->backend_state().gpu_copies() == 1);
  post_and_check(t, w, "ipc", host.data(), size);
  // READ back 16 strided blocks of the peer's pattern
  REQUIRE(t.ask(fmt::format("FILL 0 {} 23", size)) == "OK");
  std::memset(host.data(), 0, size);
  const std::size_t nb = 16, bl = std::size_t{64} << 10;
  auto r = in.create_request(xfer_op::read, blocks(mem_kind::dram, host.addr(), nb, bl, bl, 0),
                             blocks(mem_kind::vram, ta, nb, bl, 2 * bl, 0), "target");
  CHECK(r.get_if<nixl::ucx::backend>()->backend_state().gpu_copies() == nb);
  (void)r.post();
  REQUIRE(wait(r) == status::success);
  CHECK(holds_blocks(host.data(), nb, bl, 2 * bl, 23));
}

// VRAM here and the peer's host memory: the driver copies here where UCX maps that memory here
// (the peer's UCX allocated it: shared memory), else the peer runs the copy (a copy request).
TEST_CASE("ucx vram: two processes, VRAM here <-> the peer's host memory", "[ucx][vram]") {
  NEED_UCX_VRAM();
  const bool shared = GENERATE(true, false);
  INFO((shared ? "peer memory from backend::allocate" : "peer memory from the heap"));
  const std::size_t size = std::size_t{4} << 20;
  vram_and_peer_host v(size, shared);
  auto& [t, mine, in, ta] = v;
  const std::vector<std::uint8_t> pat = v.upload(31);
  auto w = in.create_request(xfer_op::write, blocks(mem_kind::vram, mine.addr(), 1, size, 0, 0),
                             blocks(mem_kind::dram, ta, 1, size, 0, 0), "target", {.notif = "d2h"});
  REQUIRE(w.get_if<nixl::ucx::backend>() != nullptr);
  // shared memory: mapped here and copied by this process; heap: the peer copies
  CHECK(w.get_if<nixl::ucx::backend>()->backend_state().gpu_copies() == (shared ? 1 : 0));
  CHECK(w.get_if<nixl::ucx::backend>()->backend_state().peer_copies() == (shared ? 0 : 1));
  post_and_check(t, w, "d2h", pat.data(), size);
  // READ 8 strided blocks of the peer's pattern into this GPU
  REQUIRE(t.ask(fmt::format("FILL 0 {} 33", size)) == "OK");
  const std::size_t nb = 8, bl = std::size_t{128} << 10;
  auto r = in.create_request(xfer_op::read, blocks(mem_kind::vram, mine.addr(), nb, bl, bl, 0),
                             blocks(mem_kind::dram, ta, nb, bl, 2 * bl, 0), "target");
  CHECK(r.get_if<nixl::ucx::backend>()->backend_state().gpu_copies() == (shared ? nb : 0));
  CHECK(r.get_if<nixl::ucx::backend>()->backend_state().peer_copies() == (shared ? 0 : nb));
  (void)r.post();
  REQUIRE(wait(r) == status::success);
  const auto got = mine.download(0, nb * bl);
  CHECK(holds_blocks(got.data(), nb, bl, 2 * bl, 33));
  // the peer answered both copy requests once its copies were issued, with the events after
  // them, waited on here: no thread of the peer waited for its GPU
  CHECK(in.get_backend<nixl::ucx::backend>().peer_copies_issued() == (shared ? 0 : 2));
  // host_vram_copy=ucx here: neither the driver nor the peer copies, UCX does
  ucx_agent u("initiator-ucx");
  u.create_backend<nixl::ucx::backend>({{"host_vram_copy", "ucx"}});
  u.register_memory(cuda_test::reg(mem_kind::vram, mine.addr(), size, 0));
  REQUIRE(u.load_remote_metadata(t.metadata()) == "target");
  auto uw = u.create_request(xfer_op::write, blocks(mem_kind::vram, mine.addr(), 1, size, 0, 0),
                             blocks(mem_kind::dram, ta, 1, size, 0, 0), "target");
  CHECK(uw.get_if<nixl::ucx::backend>()->backend_state().gpu_copies() == 0);
  CHECK(uw.get_if<nixl::ucx::backend>()->backend_state().peer_copies() == 0);
  mine.upload(pat);
  (void)uw.post();
  REQUIRE(wait(uw) == status::success);
  CHECK(t.ask(ucx_test::sum_cmd(0, size)) == ucx_test::sum_of(pat.data(), size));
}

// The peer copies between its heap and this GPU (copy requests): it answers once its copies are
// issued, with the events after them, and this process waits on those. Requests overlap, each
// ends with its data in place and its notification after it, and a release in flight waits
// for the peer's copies once they were answered.
TEST_CASE("ucx vram: the peer's copies in flight: four requests at once, release in flight",
          "[ucx][vram]") {
  NEED_UCX_VRAM();
  constexpr std::size_t k = 4, part = std::size_t{16} << 20, n = k * part;
  vram_and_peer_host v(n, false);
  auto& [t, mine, in, ta] = v;
  const std::vector<std::uint8_t> pat = v.upload(41);
  std::vector<ucx_agent::xfer_request> rs;
  for (std::size_t i = 0; i < k; ++i) {
    rs.push_back(in.create_request(xfer_op::write,
                                   blocks(mem_kind::vram, mine.addr() + i * part, 1, part, 0, 0),
                                   blocks(mem_kind::dram, ta + i * part, 1, part, 0, 0), "target",
                                   {.notif = "part-" + std::to_string(i)}));
    REQUIRE(rs.back().get_if<nixl::ucx::backend>()->backend_state().peer_copies() == 1);
  }
  for (auto& r : rs) {
    const status st = r.post();
    REQUIRE((st == status::in_progress || st == status::success));
  }
  for (auto& r : rs) REQUIRE(wait(r) == status::success);
  auto notes = ucx_test::target_notifs(t, k);
  REQUIRE(notes.size() == k);
  std::vector<std::string> got;
  for (auto& [from, msg] : notes) got.push_back(msg);
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::string>{"part-0", "part-1", "part-2", "part-3"});
  CHECK(t.ask(ucx_test::sum_cmd(0, n)) == ucx_test::sum_of(pat.data(), n));
  CHECK(in.get_backend<nixl::ucx::backend>().peer_copies_issued() == k);
  // READ the whole 64 MiB back into the GPU, then release a WRITE in flight
  REQUIRE(t.ask(fmt::format("FILL 0 {} 43", n)) == "OK");
  auto r = in.create_request(xfer_op::read, blocks(mem_kind::vram, mine.addr(), 1, n, 0, 0),
                             blocks(mem_kind::dram, ta, 1, n, 0, 0), "target");
  (void)r.post();
  REQUIRE(wait(r) == status::success);
  const auto want = mine.download(0, n);
  CHECK(holds_blocks(want.data(), 1, n, 0, 43));
  auto w = in.create_request(xfer_op::write, blocks(mem_kind::vram, mine.addr(), 1, n, 0, 0),
                             blocks(mem_kind::dram, ta, 1, n, 0, 0), "target");
  (void)w.post();
  CHECK(w.release() == status::success);
  // whatever release left in flight ends: the peer still answers, and its memory holds either
  // side's bytes only (checked by a later request that must succeed)
  auto again = in.create_request(xfer_op::write, blocks(mem_kind::vram, mine.addr(), 1, n, 0, 0),
                                 blocks(mem_kind::dram, ta, 1, n, 0, 0), "target");
  (void)again.post();
  REQUIRE(wait(again) == status::success);
  CHECK(t.ask(ucx_test::sum_cmd(0, n)) == ucx_test::sum_of(want.data(), n));
}

TEST_CASE("ucx vram: an agent with UCX and CUDA moves VRAM through CUDA, DRAM through UCX",
          "[ucx][vram]") {
  NEED_UCX_VRAM();
  using both = nixl::agent<nixl::ucx::backend, nixl::cuda::backend>;
  cuda_test::gpu_buffer src(1 << 20, 0), dst(1 << 20, second_gpu());
  ucx_test::buffer hsrc(4096), hdst(4096);
  both a("both-a"), b("both-b");
  for (both* x : {&a, &b}) {
    x->create_backend<nixl::ucx::backend>();
    x->create_backend<nixl::cuda::backend>();
  }
  a.register_memory(cuda_test::reg(mem_kind::vram, src.addr(), src.n, src.dev));
  b.register_memory(cuda_test::reg(mem_kind::vram, dst.addr(), dst.n, dst.dev));
  a.register_memory(cuda_test::reg(mem_kind::dram, hsrc.addr(), hsrc.size(), 0));
  b.register_memory(cuda_test::reg(mem_kind::dram, hdst.addr(), hdst.size(), 0));
  a.load_remote_metadata(b.local_metadata());
  src.fill_pattern(8);
  auto v = a.create_request(xfer_op::write, blocks(mem_kind::vram, src.addr(), 1, src.n, 0, 0),
                            blocks(mem_kind::vram, dst.addr(), 1, dst.n, 0, dst.dev), "both-b");
  CHECK(v.backend_name() == "CUDA");  // preferred for VRAM on one host
  (void)v.post();
  REQUIRE(wait(v) == status::success);
  CHECK(dst.download(0, dst.n) == expected_blocks(8, 1, dst.n, 0));
  // still UCX when asked, and for DRAM
  auto u = a.create_request(xfer_op::write, blocks(mem_kind::vram, src.addr(), 1, src.n, 0, 0),
                            blocks(mem_kind::vram, dst.addr(), 1, dst.n, 0, dst.dev), "both-b",
                            {.backends = {"UCX"}});
  CHECK(u.backend_name() == "UCX");
  hsrc.fill(3);
  auto h = a.create_request(xfer_op::write, blocks(mem_kind::dram, hsrc.addr(), 1, 4096, 0, 0),
                            blocks(mem_kind::dram, hdst.addr(), 1, 4096, 0, 0), "both-b");
  CHECK(h.backend_name() == "UCX");
  (void)h.post();
  REQUIRE(wait(h) == status::success);
  CHECK(hdst.holds(3, 0, 4096, 0));
}

#else

TEST_CASE("ucx vram: skipped", "[ucx][vram]") {
  NIXL_SKIP("built without the CUDA toolkit: the VRAM cases need it for GPU buffers");
}

#endif
