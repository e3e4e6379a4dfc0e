// CUDA backend tests that need no GPU: contract, parameters, wire formats, notifications.

#include <random>

#include <nixl/backends/cuda/detail/notify.hpp>
#include <nixl/detail/codec.hpp>
#include <nixl/detail/host_identity.hpp>

#include "cuda_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"

using nixl::status;
using nixl::cuda::backend;
using namespace cuda_test;
using nixl::test::what_of;

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
  using nixl::dram_t, nixl::vram_t, nixl::file_t, nixl::route;
  STATIC_REQUIRE(nixl::loopback_backend<backend> && nixl::remote_backend<backend> &&
                 nixl::notifying_backend<backend>);
  STATIC_REQUIRE(nixl::backend_for_all<backend, route<vram_t, vram_t>, route<vram_t, dram_t>,
                                       route<dram_t, vram_t>>);
  STATIC_REQUIRE(nixl::backend_for_none<backend, route<dram_t, dram_t>, route<vram_t, file_t>>);
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
  for (const auto& bad : {
           nixl::params{{"streams_per_gpu", "0"}},
           nixl::params{{"kernel_max_bytes", "12k"}},
           nixl::params{{"pin_dram", "maybe"}},
       }) {
    INFO(bad.begin()->first << '=' << bad.begin()->second);
    CHECK(code_of([&] { backend::config::from_params(bad); }) == status::invalid_param);
  }
  CHECK(code_of([] { backend::config::from_params({{"unknown_key", "1"}}); }) == status::success);
}

TEST_CASE("cuda: notification datagrams are bounded and checked", "[cuda]") {
  using namespace nixl::cuda::detail;
  auto datagram = [](std::string_view sender, std::string_view msg) {
    std::string d;
    start_datagram(d, sender);
    finish_datagram(d, d.size(), msg);
    return d;
  };
  std::string d = datagram("sender", "hello");
  std::string_view s, m;
  bool abort = true;
  REQUIRE(parse_datagram(d, s, m, abort));
  CHECK(s == "sender");
  CHECK(m == "hello");
  CHECK_FALSE(abort);
  // the kind byte: 1 is an abort notice, anything above is refused
  std::string a = d;
  a[notif_kind_at] = notif_kind_abort;
  REQUIRE(parse_datagram(a, s, m, abort));
  CHECK((abort && m == "hello"));
  a[notif_kind_at] = 2;
  CHECK_FALSE(parse_datagram(a, s, m, abort));
  REQUIRE(parse_datagram(datagram("sender", ""), s, m, abort));
  CHECK(m.empty());
  // a request replaces the message after the same prefix at each post
  const std::size_t prefix = d.size() - 5;
  finish_datagram(d, prefix, "a longer message");
  REQUIRE(parse_datagram(d, s, m, abort));
  CHECK(m == "a longer message");
  finish_datagram(d, prefix, "x");
  REQUIRE(parse_datagram(d, s, m, abort));
  CHECK((s == "sender" && m == "x"));
  CHECK(code_of([&] { (void)datagram(std::string(max_agent_name + 1, 'a'), "x"); }) ==
        status::invalid_param);
  // every truncation and any trailing byte is refused
  for (std::size_t n = 0; n < d.size(); ++n)
    CHECK_FALSE(parse_datagram(std::span(d.data(), n), s, m, abort));
  std::string longer = d + "x";
  CHECK_FALSE(parse_datagram(longer, s, m, abort));
  // random garbage never parses as a different length
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string g(rng() % 64, '\0');
    for (auto& c : g) c = static_cast<char>(rng());
    if (parse_datagram(g, s, m, abort)) CHECK(g.size() == notif_header + s.size() + m.size());
  }
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
using nixl::detail::host_identity;

// Public data of a region as a peer would send it (layout: docs/cuda.md).
std::string region_blob(nixl::mem_kind k, std::uintptr_t addr, std::size_t len) {
  nixl::detail::writer w;
  w.u32(0x5243584e);  // "NXCR"
  w.u8(2);
  w.u8(static_cast<std::uint8_t>(k));
  w.u8(0);  // flags
  w.u8(0);
  w.raw(std::string(16, 'u'));  // GPU UUID
  w.u64(addr);
  w.u64(len);
  w.u64(0);                     // offset in the allocation
  w.u64(len);                   // allocation size
  w.raw(std::string(64, 'h'));  // IPC handle
  return w.take();
}

// Connection info as a peer would send it: magic, version, identity, socket name.
struct conn_parts {
  std::uint32_t magic = 0;
  std::uint8_t version = 0;
  host_identity id;
  std::string socket;
};
conn_parts split(const std::string& info) {
  nixl::detail::reader r(info, "test");
  conn_parts c;
  c.magic = r.u32("magic");
  c.version = r.u8("version");
  c.id = host_identity::decode(r);
  c.socket = std::string(r.bytes("socket", 1000));
  r.finish();
  return c;
}
std::string join(const conn_parts& c) {
  nixl::detail::writer w;
  w.u32(c.magic);
  w.u8(c.version);
  c.id.encode(w);
  w.bytes(c.socket);
  return w.take();
}
// `info` with its identity changed by `f`.
template <class F>
std::string with_identity(const std::string& info, F&& f) {
  auto c = split(info);
  f(c.id);
  return join(c);
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
  const std::string far =
      with_identity(b.connection_info(), [](host_identity& id) { id.boot_id[0] ^= 0x01; });
  auto pf = b.load_peer("far", bytes(far));
  CHECK_FALSE(pf.same_host);
  auto rf = b.unpack(pf, nixl::mem_kind::vram, {0x20000, 4096, 0},
                     bytes(region_blob(nixl::mem_kind::vram, 0x20000, 4096)));
  CHECK(attempt(pf, rf).find("runs on host") != std::string::npos);
  CHECK(code_of([&] { b.notify(pf, "x"); }) == status::not_supported);
  // another process of this host: another pid and token; its DRAM is out of reach
  const std::string near = with_identity(b.connection_info(), [](host_identity& id) {
    id.pid += 1;
    id.token ^= 0x55;
  });
  auto pn = b.load_peer("near", bytes(near));
  CHECK(pn.same_host);
  CHECK_FALSE(pn.same_process);
  auto rn = b.unpack(pn, nixl::mem_kind::dram, {0x30000, 4096, 0},
                     bytes(region_blob(nixl::mem_kind::dram, 0x30000, 4096)));
  CHECK(attempt(pn, rn).find("another process") != std::string::npos);
  // the blob must describe the descriptor it comes with
  CHECK(code_of([&] {
          (void)b.unpack(pn, nixl::mem_kind::dram, {0x30000, 8192, 0},
                         bytes(region_blob(nixl::mem_kind::dram, 0x30000, 4096)));
        }) == status::mismatch);
  CHECK(code_of([&] {
          (void)b.unpack(pn, nixl::mem_kind::vram, {0x30000, 4096, 0},
                         bytes(region_blob(nixl::mem_kind::dram, 0x30000, 4096)));
        }) == status::mismatch);
}

namespace {
void put_le(std::string& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
}  // namespace

TEST_CASE("cuda: connection info from a peer is bounded and checked", "[cuda]") {
  backend b({}, ctx("a"));
  const std::string info = b.connection_info();
  auto p = b.load_peer("a2", bytes(info));
  CHECK(p.same_host);
  CHECK(p.same_process);
  CHECK(p.host == host_identity::self().hostname);
  auto load = [&](const std::string& x) {
    return code_of([&] { (void)b.load_peer("x", bytes(x)); });
  };
  // every truncation, and any trailing byte
  for (std::size_t n = 0; n < info.size(); ++n)
    CHECK(load(info.substr(0, n)) == status::invalid_param);
  CHECK(load(info + "z") == status::invalid_param);
  CHECK(what_of([&] { (void)b.load_peer("short", bytes(info.substr(0, 12))); })
            .find("connection info of agent 'short' is malformed (12 bytes: CUDA connection "
                  "info: truncated") != std::string::npos);
  // magic and version
  for (std::size_t i = 0; i < 4; ++i) {
    std::string x = info;
    x[i] = static_cast<char>(x[i] ^ 0x20);
    CHECK(load(x) == status::invalid_param);
  }
  auto c = split(info);
  c.version = 1;
  CHECK(load(join(c)) == status::mismatch);
  CHECK(what_of([&] { (void)b.load_peer("v1", bytes(join(c))); }).find("wire version 1") !=
        std::string::npos);
  // lengths: the boot id's above its limit, the socket name empty or too long
  std::string x = info;
  x[5] = 65;  // boot id length (u32 at byte 5): limit 64
  CHECK(load(x) == status::invalid_param);
  c = split(info);
  c.socket.clear();
  CHECK(load(join(c)) == status::invalid_param);
  c.socket.assign(101, 's');
  CHECK(load(join(c)) == status::invalid_param);
  c.socket.assign(100, 's');
  CHECK(load(join(c)) == status::success);
  // random bytes, with and without a valid magic and version in front, never load
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    std::string g(rng() % 200, '\0');
    for (auto& ch : g) ch = static_cast<char>(rng());
    if (i % 2 == 1 && g.size() >= 5) g.replace(0, 5, info.substr(0, 5));
    const auto st = load(g);
    CHECK((st == status::invalid_param || st == status::mismatch));
  }
}

TEST_CASE("cuda: a peer shares this host only with the same kernel and namespaces", "[cuda]") {
  // CUDA IPC and the abstract notification socket need one kernel boot and the same PID, IPC
  // and network namespaces (docs/cuda.md, "Public data and identity").
  if (!host_identity::self().boot_id_from_kernel())
    NIXL_SKIP("/proc/sys/kernel/random/boot_id is unreadable: only one process is one host");
  backend b({}, ctx("me"));
  const std::string info = b.connection_info();
  auto other = [&](auto change) {
    const std::string x = with_identity(info, [&](host_identity& id) {
      id.token ^= 1;  // another process in every case
      change(id);
    });
    return b.load_peer("other", bytes(x));
  };
  const auto same = other([](host_identity&) {});
  CHECK(same.same_host);
  CHECK_FALSE(same.same_process);
  CHECK_FALSE(other([](host_identity& id) { id.boot_id[0] ^= 1; }).same_host);
  CHECK_FALSE(other([](host_identity& id) { id.ipc_ns += 1; }).same_host);
  CHECK_FALSE(other([](host_identity& id) { id.pid_ns += 1; }).same_host);
  CHECK_FALSE(other([](host_identity& id) { id.net_ns += 1; }).same_host);
  // a peer in another network namespace is refused with the reason
  auto far = other([](host_identity& id) { id.net_ns += 1; });
  CHECK(code_of([&] { b.notify(far, "x"); }) == status::not_supported);
}

TEST_CASE("cuda: region data from a peer is bounded and checked", "[cuda]") {
  backend b({}, ctx("me"));
  const std::string info = b.connection_info();
  auto p = b.load_peer("peer", bytes(info));
  const nixl::desc d{0x30000, 4096, 0};
  const std::string good = region_blob(nixl::mem_kind::dram, 0x30000, 4096);
  auto load = [&](const std::string& x, nixl::mem_kind k = nixl::mem_kind::dram) {
    return code_of([&] {
      auto rr = b.unpack(p, k, d, bytes(x));
      b.unload_region(rr);
    });
  };
  // a region of a peer in this process loads and is used directly
  auto rr = b.unpack(p, nixl::mem_kind::dram, d, bytes(good));
  CHECK(rr.reachable == nixl::cuda::reach::ok);
  CHECK(rr.access == 0x30000);
  CHECK(load(good) == status::success);
  // every truncation, any trailing byte, magic and version
  for (std::size_t n = 0; n < good.size(); ++n)
    CHECK(load(good.substr(0, n)) == status::invalid_param);
  CHECK(load(good + '\0') == status::invalid_param);
  for (std::size_t i = 0; i < 5; ++i) {
    std::string x = good;
    x[i] = static_cast<char>(x[i] ^ 0x04);
    CHECK(load(x) == status::invalid_param);
  }
  CHECK(what_of([&] {
          (void)b.unpack(p, nixl::mem_kind::dram, d, bytes(good.substr(0, 99)));
        }).find("region of agent 'peer' is malformed (99 bytes") != std::string::npos);
  // it must describe the descriptor it comes with: kind, address, length
  CHECK(load(good, nixl::mem_kind::vram) == status::mismatch);
  std::string x = good;
  put_le(x, 24, 0x30001, 8);
  CHECK(load(x) == status::mismatch);
  x = good;
  put_le(x, 32, 4095, 8);
  CHECK(load(x) == status::mismatch);
  // the offset and length must lie inside the allocation, without wrapping around
  x = good;
  put_le(x, 40, 1, 8);  // offset 1 in an allocation of 4096: 4096 bytes do not fit
  CHECK(load(x) == status::mismatch);
  x = good;
  put_le(x, 40, ~std::uint64_t{0}, 8);
  put_le(x, 48, ~std::uint64_t{0}, 8);
  CHECK(load(x) == status::mismatch);
  x = good;
  put_le(x, 40, 4096, 8);
  put_le(x, 48, 8192, 8);
  CHECK(load(x) == status::success);
  // random bytes of the right size never load
  std::mt19937 rng(13);
  for (int i = 0; i < 2000; ++i) {
    std::string g(good.size(), '\0');
    for (auto& c : g) c = static_cast<char>(rng());
    if (i % 2 == 1) g.replace(0, 5, good.substr(0, 5));
    const auto st = load(g);
    CHECK((st == status::invalid_param || st == status::mismatch));
  }
}
