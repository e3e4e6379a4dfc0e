// CUDA backend tests that need no GPU: contract, parameters, wire formats, notifications.

#include <random>

#include <nixl/backends/cuda/notify.hpp>

#include "cuda_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"

using nixl::status;
using nixl::cuda::backend;
using namespace cuda_test;

namespace {
using nixl::test::code_of;
nixl::backend_context ctx(std::string name) {
  return {std::move(name), nixl::thread_sync::none, false, {}};
}
std::span<const std::byte> bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}
}  // namespace

TEST_CASE("cuda: the backend satisfies the layered contract", "[cuda]") {
  STATIC_REQUIRE(nixl::backend<backend>);
  STATIC_REQUIRE(nixl::loopback_backend<backend>);
  STATIC_REQUIRE(nixl::remote_backend<backend>);
  STATIC_REQUIRE(nixl::notifying_backend<backend>);
  STATIC_REQUIRE(nixl::backend_for<backend, nixl::vram_t, nixl::vram_t>);
  STATIC_REQUIRE(nixl::backend_for<backend, nixl::vram_t, nixl::dram_t>);
  STATIC_REQUIRE(nixl::backend_for<backend, nixl::dram_t, nixl::vram_t>);
  STATIC_REQUIRE_FALSE(nixl::backend_for<backend, nixl::dram_t, nixl::dram_t>);
  STATIC_REQUIRE_FALSE(nixl::backend_for<backend, nixl::vram_t, nixl::file_t>);
  STATIC_REQUIRE(backend::name == "CUDA");
}

TEST_CASE("cuda: parameters", "[cuda]") {
  const auto d = backend::default_params();
  CHECK(d.at("streams_per_gpu") == "4");
  CHECK(d.count("kernel_max_bytes") == 1);
  CHECK(d.at("pin_dram") == "true");
  auto c = backend::config::from_params({{"streams_per_gpu", "2"},
                                         {"kernel_max_bytes", "0x10000"},
                                         {"kernel_min_count", "3"},
                                         {"pin_dram", "false"}});
  CHECK(c.streams_per_gpu == 2);
  CHECK(c.kernel_max_bytes == 65536);
  CHECK(c.kernel_min_count == 3);
  CHECK_FALSE(c.pin_dram);
  CHECK(backend::config::from_params(c.to_params()).kernel_max_bytes == 65536);
  CHECK(code_of([] {
          backend::config::from_params({{"streams_per_gpu", "0"}});
        }) == status::invalid_param);
  CHECK(code_of([] {
          backend::config::from_params({{"kernel_max_bytes", "12k"}});
        }) == status::invalid_param);
  CHECK(code_of([] {
          backend::config::from_params({{"pin_dram", "maybe"}});
        }) == status::invalid_param);
  CHECK(code_of([] { backend::config::from_params({{"unknown_key", "1"}}); }) == status::success);
}

TEST_CASE("cuda: notification datagrams are bounded and checked", "[cuda]") {
  using namespace nixl::cuda::detail;
  std::string d;
  start_datagram(d, "sender");
  const auto prefix = d.size();
  finish_datagram(d, prefix, "hello");
  std::string_view s, m;
  REQUIRE(parse_datagram(d, s, m));
  CHECK(s == "sender");
  CHECK(m == "hello");
  finish_datagram(d, prefix, "");
  REQUIRE(parse_datagram(d, s, m));
  CHECK(m.empty());
  // every truncation and any trailing byte is refused
  finish_datagram(d, prefix, "hello");
  for (std::size_t n = 0; n < d.size(); ++n)
    CHECK_FALSE(parse_datagram(std::span(d.data(), n), s, m));
  std::string longer = d + "x";
  CHECK_FALSE(parse_datagram(longer, s, m));
  // random garbage never parses as a different length
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string g(rng() % 64, '\0');
    for (auto& c : g) c = static_cast<char>(rng());
    if (parse_datagram(g, s, m)) CHECK(g.size() == notif_header + s.size() + m.size());
  }
}

TEST_CASE("cuda: peers' bytes are checked", "[cuda]") {
  backend b({}, ctx("a"));
  const std::string info = b.connection_info();
  auto p = b.load_peer("a2", bytes(info));
  CHECK(p.same_host);
  CHECK(p.same_process);
  // truncated or padded connection info is refused
  for (std::size_t n = 0; n < info.size(); n += 3)
    CHECK(code_of([&] { (void)b.load_peer("x", bytes(info.substr(0, n))); }) ==
          status::invalid_param);
  CHECK(code_of([&] { (void)b.load_peer("x", bytes(info + "z")); }) == status::invalid_param);
  // public data of the wrong size or content is refused
  const std::string garbage(144, 'g');
  CHECK(code_of([&] {
          (void)b.unpack(p, nixl::mem_kind::vram, {0x1000, 16, 0}, bytes(garbage));
        }) == status::invalid_param);
  CHECK(code_of([&] {
          (void)b.unpack(p, nixl::mem_kind::vram, {0x1000, 16, 0}, bytes(""));
        }) == status::invalid_param);
}

TEST_CASE("cuda: without a GPU registration is refused with the reason", "[cuda]") {
  if (backend::device_count() > 0) NIXL_SKIP("a GPU is present; see the GPU tests");
  backend b({}, ctx("a"));
  std::vector<char> host(4096);
  try {
    (void)b.register_region(
        nixl::mem_kind::dram,
        nixl::reg_desc{{reinterpret_cast<std::uintptr_t>(host.data()), host.size(), 0}, ""});
    FAIL("registration without a GPU succeeded");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == status::not_supported);
    CHECK(std::string(e.what()).find(std::string(backend::no_device_reason())) !=
          std::string::npos);
  }
}

TEST_CASE("cuda: standalone notifications between agents, and to itself", "[cuda]") {
  agent a("nA"), b("nB");
  a.create_backend("CUDA");
  b.create_backend("CUDA");
  a.load_remote_metadata(b.local_metadata());
  b.load_remote_metadata(a.local_metadata());
  a.notify("nB", "first");
  a.notify("nB", "");
  b.notify("nA", std::string(1000, 'z'));
  a.notify("nA", "self");
  // Unix datagrams reach the receive queue at once.
  nixl::notif_map mb;
  b.notifications(mb);
  CHECK(mb["nA"] == std::vector<std::string>{"first", ""});
  nixl::notif_map m;
  a.notifications(m);
  const auto& got = m["nB"];
  REQUIRE(got.size() == 1);
  CHECK(got[0] == std::string(1000, 'z'));
  CHECK(m["nA"] == std::vector<std::string>{"self"});
  // too long
  CHECK(code_of([&] { a.notify("nB", std::string(100 * 1024, 'x')); }) == status::invalid_param);
}

namespace {
// Public data of a region as a peer would send it (layout: docs/cuda.md).
std::string region_blob(nixl::mem_kind k, const std::string& conn_info, std::uintptr_t addr,
                        std::size_t len) {
  std::string b(144, '\0');
  auto put = [&](std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(0, 0x5243584e, 4);
  b[4] = 1;
  b[5] = static_cast<char>(k);
  b.replace(8, 24, conn_info.substr(8, 24));  // boot id and process token of the sender
  put(48, addr, 8);
  put(56, len, 8);
  put(64, 0, 8);
  put(72, len, 8);
  return b;
}
}  // namespace

TEST_CASE("cuda: peers on another host, and DRAM of another process, are refused clearly",
          "[cuda]") {
  backend b({}, ctx("me"));
  backend::region local;
  local.kind = nixl::mem_kind::vram;
  local.addr = local.access = 0x10000;
  local.len = 4096;
  local.device = 0;
  local.device_access = true;
  auto attempt = [&](backend::peer& p, const backend::remote_region& rr) -> std::string {
    nixl::bound_desc<backend::region> l;
    l.addr = 0x10000;
    l.len = 64;
    l.region = &local;
    nixl::bound_desc<backend::remote_region> r;
    r.addr = rr.addr;
    r.len = 64;
    r.region = &rr;
    backend::request req;
    try {
      b.prepare(req, nixl::xfer_op::write, std::span(&l, 1), std::span(&r, 1), p);
    } catch (const nixl::error& e) {
      CHECK(e.status_code() == status::not_supported);
      return e.what();
    }
    return "accepted";
  };
  // another host: a different boot id
  std::string far = b.connection_info();
  far[8] = static_cast<char>(far[8] ^ 0x55);
  auto pf = b.load_peer("far", bytes(far));
  CHECK_FALSE(pf.same_host);
  auto rf = b.unpack(pf, nixl::mem_kind::vram, {0x20000, 4096, 0},
                     bytes(region_blob(nixl::mem_kind::vram, far, 0x20000, 4096)));
  CHECK(attempt(pf, rf).find("runs on host") != std::string::npos);
  CHECK(code_of([&] { b.notify(pf, "x"); }) == status::not_supported);
  // another process of this host: a different token; its DRAM is out of reach
  std::string near = b.connection_info();
  near[24] = static_cast<char>(near[24] ^ 0x55);
  auto pn = b.load_peer("near", bytes(near));
  CHECK(pn.same_host);
  CHECK_FALSE(pn.same_process);
  auto rn = b.unpack(pn, nixl::mem_kind::dram, {0x30000, 4096, 0},
                     bytes(region_blob(nixl::mem_kind::dram, near, 0x30000, 4096)));
  CHECK(attempt(pn, rn).find("another process") != std::string::npos);
  // the blob must describe the descriptor it comes with
  CHECK(code_of([&] {
          (void)b.unpack(pn, nixl::mem_kind::dram, {0x30000, 8192, 0},
                         bytes(region_blob(nixl::mem_kind::dram, near, 0x30000, 4096)));
        }) == status::mismatch);
  CHECK(code_of([&] {
          (void)b.unpack(pn, nixl::mem_kind::vram, {0x30000, 4096, 0},
                         bytes(region_blob(nixl::mem_kind::dram, near, 0x30000, 4096)));
        }) == status::mismatch);
}
