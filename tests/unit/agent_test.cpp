#include <nixl/agent.hpp>

#include <unistd.h>
#include <cstdio>
#include <thread>

#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::xfer_op;

namespace {
using nixl::test::code_of;
}  // namespace

TEST_CASE("agent construction and backend creation") {
  CHECK(code_of([] { test_agent a(""); }) == status::invalid_param);
  test_agent a("a");
  CHECK(test_agent::available_backends()[0] == "MEMCPY");
  CHECK_FALSE(a.has_backend("MEMCPY"));
  a.create_backend("MEMCPY", {{"delay_polls", "0"}});
  CHECK(a.has_backend("MEMCPY"));
  CHECK(code_of([&] { a.create_backend("MEMCPY"); }) == status::invalid_param);
  CHECK(code_of([&] { a.create_backend<memcpy_backend>(); }) == status::invalid_param);
  CHECK(code_of([&] { a.create_backend("NOPE"); }) == status::not_found);
  CHECK(code_of([&] { a.create_backend("TESTFILE", {}); }) == status::success);
  CHECK(a.created_backends() == std::vector<std::string>{"MEMCPY", "TESTFILE"});
  test_agent b("b");
  CHECK(code_of([&] {
          b.create_backend("MEMCPY", {{"delay_polls", "x"}});
        }) == status::invalid_param);
  auto [p, kinds] = test_agent::plugin_params("MEMCPY");
  CHECK(p.at("delay_polls") == "0");
  CHECK(kinds == std::vector<nixl::mem_kind>{nixl::mem_kind::dram});
  auto [p2, k2] = a.backend_params("TESTFILE");
  CHECK(k2 == std::vector<nixl::mem_kind>{nixl::mem_kind::dram, nixl::mem_kind::file});
  CHECK(code_of([&] { (void)b.backend_params("MEMCPY"); }) == status::not_found);
}

TEST_CASE("registration rules") {
  test_agent a("a");
  a.create_backend<memcpy_backend>();
  buffer buf(4096);
  CHECK(code_of([&] {
          a.register_memory(nixl::reg_list<nixl::dram_t>{{{buf.addr(), 0, 0}, ""}});
        }) == status::invalid_param);
  a.register_memory(buf.reg());
  CHECK(a.get_backend<memcpy_backend>().registered() == 1);
  CHECK(code_of([&] { a.register_memory(buf.reg()); }) == status::invalid_param);
  // no backend takes vram
  CHECK(code_of([&] {
          a.register_memory(nixl::reg_list<nixl::vram_t>{{{buf.addr(), 16, 0}, ""}});
        }) == status::not_found);
  // restricted to a backend that was not created
  CHECK(code_of([&] { a.register_memory(buf.reg(), {{"TESTFILE"}}); }) == status::not_found);
  // a batch with one bad entry registers nothing (all-or-nothing per backend)
  buffer other(128);
  nixl::reg_dlist batch(nixl::mem_kind::dram,
                        {{{other.addr(), 128, 0}, ""}, {{buf.addr(), 4096, 0}, ""}});
  CHECK(code_of([&] { a.register_memory(batch); }) == status::invalid_param);
  CHECK(a.get_backend<memcpy_backend>().registered() == 1);
  // deregistration must match exactly; a miss removes nothing
  nixl::reg_dlist wrong(nixl::mem_kind::dram,
                        {{{buf.addr(), 4096, 0}, ""}, {{buf.addr(), 8, 0}, ""}});
  CHECK(code_of([&] { a.deregister_memory(wrong); }) == status::not_found);
  CHECK(a.get_backend<memcpy_backend>().registered() == 1);
  a.deregister_memory(buf.reg());
  CHECK(a.get_backend<memcpy_backend>().registered() == 0);
  CHECK(code_of([&] { a.deregister_memory(buf.reg()); }) == status::not_found);
}

TEST_CASE("write and read between two agents, many descriptors") {
  pair_fixture<> f;
  buffer src(1000 * 64), dst(1000 * 64, 0xee);
  src.iota();
  f.connect(src, dst);
  auto req =
      f.a.create_request(xfer_op::write, src.blocks(1000, 64), dst.blocks(1000, 64), "target");
  CHECK(req.status() == status::not_posted);
  CHECK(req.post() == status::success);
  CHECK(req.status() == status::success);
  CHECK(src.bytes == dst.bytes);
  // contiguous on both sides: merged into one backend descriptor
  CHECK(req.descriptor_count() == 1);
  std::fill(src.bytes.begin(), src.bytes.end(), 0);
  auto rd = f.a.create_request(xfer_op::read, src.blocks(1000, 64), dst.blocks(1000, 64), "target",
                               {.skip_merge = true});
  CHECK(rd.descriptor_count() == 1000);
  CHECK(rd.post() == status::success);
  CHECK(src.bytes == dst.bytes);
}

TEST_CASE("descriptor and list errors are refused before any backend sees them") {
  pair_fixture<> f;
  buffer src(256), dst(256);
  f.connect(src, dst);
  nixl::xfer_list<nixl::dram_t> outside{{dst.addr(200), 100, 0}};
  nixl::xfer_list<nixl::dram_t> local100{{src.addr(), 100, 0}};
  CHECK(code_of([&] { f.a.create_request(xfer_op::write, local100, outside, "target"); }) ==
        status::not_found);
  nixl::xfer_list<nixl::dram_t> bad_local{{src.addr(250), 100, 0}};
  CHECK(code_of([&] {
          f.a.create_request(xfer_op::write, bad_local, dst.blocks(1, 100), "target");
        }) == status::not_found);
  CHECK(code_of([&] {
          f.a.create_request(xfer_op::write, src.blocks(2, 10), dst.blocks(1, 10), "target");
        }) == status::invalid_param);
  CHECK(code_of([&] {
          f.a.create_request(xfer_op::write, src.blocks(1, 10), dst.blocks(1, 11), "target");
        }) == status::invalid_param);
  CHECK(code_of([&] {
          f.a.create_request(xfer_op::write, nixl::xfer_list<nixl::dram_t>{},
                             nixl::xfer_list<nixl::dram_t>{}, "target");
        }) == status::invalid_param);
  CHECK(code_of([&] {
          f.a.create_request(xfer_op::write, src.blocks(1, 10), dst.blocks(1, 10), "nobody");
        }) == status::not_found);
  // the error message names the descriptor
  try {
    f.a.create_request(xfer_op::write, local100, outside, "target");
  } catch (const nixl::error& e) {
    CHECK(std::string(e.what()).find("descriptor 0") != std::string::npos);
    CHECK(std::string(e.what()).find("'target'") != std::string::npos);
  }
}

TEST_CASE("prepared lists and index requests") {
  pair_fixture<> f;
  buffer src(64 * 16), dst(64 * 16);
  src.iota(1);
  f.connect(src, dst);
  auto lp = f.a.prepare_list(src.blocks(16, 64));
  auto rp = f.a.prepare_list("target", dst.blocks(16, 64));
  CHECK(lp.is_local());
  CHECK_FALSE(rp.is_local());
  CHECK(rp.backends() == std::vector<std::string_view>{"MEMCPY"});
  std::vector<int> li{0, 1, 2, 3, 8}, ri{4, 5, 6, 7, 0};
  auto req = f.a.make_request(xfer_op::write, lp, li, rp, ri);
  CHECK(req.descriptor_count() == 2);  // 0..3 -> 4..7 merge; 8 -> 0 alone
  CHECK(req.post() == status::success);
  CHECK(std::equal(src.bytes.begin(), src.bytes.begin() + 256, dst.bytes.begin() + 256));
  CHECK(std::equal(src.bytes.begin() + 512, src.bytes.begin() + 576, dst.bytes.begin()));
  auto unmerged = f.a.make_request(xfer_op::write, lp, li, rp, ri, {.skip_merge = true});
  CHECK(unmerged.descriptor_count() == 5);
  // bad index vectors
  std::vector<int> one{0}, two{0, 1}, neg{-1}, big{16};
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, one, rp, two); }) ==
        status::invalid_param);
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, neg, rp, one); }) ==
        status::invalid_param);
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, one, rp, big); }) ==
        status::invalid_param);
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, {}, rp, {}); }) ==
        status::invalid_param);
  // sides swapped
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, rp, one, lp, one); }) ==
        status::invalid_param);
  // lengths that differ per pair
  auto lp2 = f.a.prepare_list(src.blocks(2, 32));
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp2, one, rp, one); }) ==
        status::invalid_param);
  // a list nothing covers
  buffer stray(64);
  CHECK(code_of([&] { (void)f.a.prepare_list(stray.whole()); }) == status::not_found);
  CHECK(code_of([&] { (void)f.a.prepare_list("nobody", dst.whole()); }) == status::not_found);
}

TEST_CASE("loopback: an agent moves data to itself") {
  test_agent a("self");
  a.create_backend<memcpy_backend>();
  buffer x(512), y(512);
  x.iota(3);
  a.register_memory(x.reg());
  a.register_memory(y.reg());
  auto r = a.create_request(xfer_op::write, x.whole(), y.whole(), "self", {.notif = "looped"});
  CHECK(r.post() == status::success);
  CHECK(x.bytes == y.bytes);
  auto n = a.notifications();
  REQUIRE(n["self"].size() == 1);
  CHECK(n["self"][0] == "looped");
  CHECK(a.check_remote_metadata("self"));
  CHECK(a.check_remote_metadata("self", y.whole()));
  CHECK(r.release() == status::success);
  // deregistering removes the loopback target region too
  a.deregister_memory(y.reg());
  CHECK_FALSE(a.check_remote_metadata("self", y.whole()));
}

TEST_CASE("memory to file through a loopback-only backend") {
  test_agent a("files");
  a.create_backend("TESTFILE");
  char path[] = "/tmp/nixl-agent-test-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  buffer mem(8192), back(8192);
  mem.iota(9);
  a.register_memory(mem.reg());
  a.register_memory(back.reg());
  a.register_memory(nixl::reg_list<nixl::file_t>{{{0, 0, static_cast<std::uint64_t>(fd)}, path}});
  nixl::xfer_list<nixl::file_t> at{{4096, 8192, static_cast<std::uint64_t>(fd)}};
  auto w = a.create_request(xfer_op::write, mem.whole(), at, "files");
  CHECK(w.backend_name() == "TESTFILE");
  CHECK(w.post() == status::success);
  auto r = a.create_request(xfer_op::read, back.whole(), at, "files");
  CHECK(r.post() == status::success);
  CHECK(mem.bytes == back.bytes);
  // TESTFILE has no metadata to offer
  CHECK(code_of([&] { (void)a.local_metadata(); }) == status::invalid_param);
  ::close(fd);
}

TEST_CASE("metadata loading: incremental, conflicts, own name, garbage") {
  pair_fixture<> f;
  buffer b1(64), b2(64);
  f.b.register_memory(b1.reg());
  CHECK(code_of([&] { f.a.load_remote_metadata(f.a.local_metadata()); }) == status::invalid_param);
  CHECK(code_of([&] { f.a.load_remote_metadata(std::string_view("garbage")); }) ==
        status::mismatch);
  CHECK_FALSE(f.a.check_remote_metadata("target"));
  CHECK(f.a.load_remote_metadata(f.b.local_metadata()) == "target");
  CHECK(f.a.check_remote_metadata("target"));
  CHECK(f.a.check_remote_metadata("target", b1.whole()));
  CHECK_FALSE(f.a.check_remote_metadata("target", b2.whole()));
  const auto gen = f.a.remote_generation("target");
  // incremental: the same metadata again is fine; new regions are added
  f.a.load_remote_metadata(f.b.local_metadata());
  f.b.register_memory(b2.reg());
  f.a.load_remote_metadata(f.b.local_partial_metadata(b2.reg(), false));
  CHECK(f.a.check_remote_metadata("target", b2.whole()));
  CHECK(f.a.remote_generation("target") == gen);
  // conflicting connection info
  auto md = nixl::decode_metadata(f.b.local_metadata());
  md.connections[0].info = "target#999";
  CHECK(code_of([&] { f.a.load_remote_metadata(nixl::encode(md)); }) == status::not_allowed);
  // changed public data of a loaded region
  auto md2 = nixl::decode_metadata(f.b.local_metadata());
  md2.sections[0].regions[0].data = "memcpy:0";
  CHECK(code_of([&] { f.a.load_remote_metadata(nixl::encode(md2)); }) == status::not_allowed);
  // still loaded and usable after refused loads
  CHECK(f.a.check_remote_metadata("target", b1.whole()));
  // metadata of an agent sharing no backend
  nixl::agent_metadata stranger{"stranger", false, {{"OTHER", "x"}}, {}};
  CHECK(code_of([&] { f.a.load_remote_metadata(nixl::encode(stranger)); }) == status::backend);
  CHECK_FALSE(f.a.check_remote_metadata("stranger"));
}

TEST_CASE("partial metadata: connection info first, then labelled regions") {
  pair_fixture<> f;
  buffer b1(64), b2(64);
  f.b.register_memory(b1.reg());
  f.b.register_memory(b2.reg());
  // regions without connection info cannot be loaded first
  CHECK(code_of([&] { f.a.load_remote_metadata(f.b.local_partial_metadata(b1.reg(), false)); }) ==
        status::not_found);
  CHECK_FALSE(f.a.check_remote_metadata("target"));
  auto conn_only = nixl::decode_metadata(f.b.local_partial_metadata(nixl::reg_dlist{}, false));
  CHECK(conn_only.partial);
  CHECK(conn_only.sections.empty());
  CHECK(conn_only.connections.size() == 1);
  f.a.load_remote_metadata(nixl::encode(conn_only));
  CHECK(f.a.check_remote_metadata("target"));
  CHECK_FALSE(f.a.check_remote_metadata("target", b1.whole()));
  f.a.load_remote_metadata(f.b.local_partial_metadata(b1.reg(), false));
  CHECK(f.a.check_remote_metadata("target", b1.whole()));
  CHECK_FALSE(f.a.check_remote_metadata("target", b2.whole()));
  // with connection info in one go, on a fresh agent
  test_agent c("c");
  c.create_backend<memcpy_backend>();
  c.load_remote_metadata(f.b.local_partial_metadata(b2.reg(), true));
  CHECK(c.check_remote_metadata("target", b2.whole()));
  CHECK_FALSE(c.check_remote_metadata("target", b1.whole()));
  // unregistered entries cannot be published
  buffer stray(8);
  CHECK(code_of([&] { (void)f.b.local_partial_metadata(stray.reg(), true); }) == status::not_found);
}

TEST_CASE("invalidation and generations") {
  pair_fixture<> f;
  buffer src(64), dst(64);
  f.connect(src, dst);
  const auto g1 = f.a.remote_generation("target");
  auto req = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  auto prepped = f.a.prepare_list("target", dst.whole());
  auto lp = f.a.prepare_list(src.whole());
  CHECK(req.post() == status::success);
  CHECK(code_of([&] { f.a.invalidate_remote_metadata("initiator"); }) == status::invalid_param);
  CHECK(code_of([&] { f.a.invalidate_remote_metadata("nobody"); }) == status::not_found);
  f.a.invalidate_remote_metadata("target");
  CHECK_FALSE(f.a.check_remote_metadata("target"));
  CHECK(req.post() == status::not_found);
  std::vector<int> zero{0};
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, zero, prepped, zero); }) ==
        status::not_found);
  f.a.load_remote_metadata(f.b.local_metadata());
  CHECK(f.a.remote_generation("target") > g1);
  CHECK(req.post() == status::not_found);  // built against the old generation
  auto fresh = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  CHECK(fresh.post() == status::success);
  CHECK(fresh.remote_generation() > req.remote_generation());
}

TEST_CASE("a vanished peer yields remote_disconnect and is invalidated") {
  test_agent a("a");
  a.create_backend<memcpy_backend>();
  buffer src(64), dst(64);
  a.register_memory(src.reg());
  auto b = std::make_unique<test_agent>("b");
  b->create_backend<memcpy_backend>();
  b->register_memory(dst.reg());
  a.load_remote_metadata(b->local_metadata());
  auto req = a.create_request(xfer_op::write, src.whole(), dst.whole(), "b");
  b.reset();
  CHECK(req.post() == status::remote_disconnect);
  CHECK_FALSE(a.check_remote_metadata("b"));
  CHECK(req.post() == status::not_found);
}

TEST_CASE("notifications: with transfers, standalone, binary safe, appended per agent") {
  pair_fixture<> f;
  buffer src(64), dst(64);
  f.a.register_memory(src.reg());
  f.b.register_memory(dst.reg());
  f.exchange();
  const std::string binary("a\0b\xff", 4);
  auto req =
      f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target", {.notif = binary});
  CHECK(req.post() == status::success);
  CHECK(req.post(std::string_view("")) == status::success);  // empty but present
  CHECK(req.post(nixl::notif_arg{}) == status::success);     // cleared: nothing sent
  CHECK(req.post() == status::success);                      // still cleared
  f.a.notify("target", "standalone");
  f.b.notify("initiator", "back");
  nixl::notif_map m{{"target", {"earlier"}}};
  f.b.notifications(m);
  REQUIRE(m["initiator"].size() == 3);
  CHECK(m["initiator"][0] == binary);
  CHECK(m["initiator"][1].empty());
  CHECK(m["initiator"][2] == "standalone");
  CHECK(m["target"] == std::vector<std::string>{"earlier"});  // appended, not replaced
  f.b.notifications(m);
  CHECK(m["initiator"].size() == 3);  // consumed
  CHECK(f.a.notifications()["target"] == std::vector<std::string>{"back"});
  CHECK(code_of([&] { f.a.notify("nobody", "x"); }) == status::not_found);
  nixl::agent<file_backend> quiet("quiet");
  quiet.create_backend<file_backend>();
  CHECK(code_of([&] { (void)quiet.notifications(); }) == status::backend);
}

TEST_CASE("telemetry is gated by config and environment") {
  ::unsetenv("NIXL_TELEMETRY_ENABLE");
  {
    pair_fixture<> f;
    buffer src(1024), dst(1024);
    f.connect(src, dst);
    auto r = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
    nixl::xfer_telemetry t;
    CHECK(r.telemetry(t) == status::no_telemetry);
  }
  test_agent a("a", {.capture_telemetry = true}), b("b");
  CHECK(a.telemetry_enabled());
  a.create_backend<memcpy_backend>({{"delay_polls", "3"}});
  b.create_backend<memcpy_backend>();
  buffer src(1024), dst(1024);
  connect_pair(a, b, src, dst);
  auto r = a.create_request(xfer_op::write, src.blocks(4, 256), dst.blocks(4, 256), "b",
                            {.skip_merge = true});
  nixl::xfer_telemetry t;
  CHECK(r.telemetry(t) == status::not_posted);
  CHECK(r.post() == status::in_progress);
  CHECK(wait(r) == status::success);
  REQUIRE(r.telemetry(t) == status::success);
  CHECK(t.total_bytes == 1024);
  CHECK(t.desc_count == 4);
  CHECK(t.xfer_duration >= t.post_duration);
  ::setenv("NIXL_TELEMETRY_ENABLE", "no", 1);
  test_agent off("off", {.capture_telemetry = true});
  CHECK_FALSE(off.telemetry_enabled());
  ::setenv("NIXL_TELEMETRY_ENABLE", "y", 1);
  test_agent on("on");
  CHECK(on.telemetry_enabled());
  ::unsetenv("NIXL_TELEMETRY_ENABLE");
}

TEST_CASE("rw and strict modes: concurrent posting from several threads") {
  for (auto mode : {nixl::thread_sync::rw, nixl::thread_sync::strict}) {
    test_agent a("a", {.sync = mode}), b("b", {.sync = mode});
    a.create_backend<memcpy_backend>();
    b.create_backend<memcpy_backend>();
    constexpr int threads = 4, blocks = 64;
    buffer src(threads * blocks * 64), dst(threads * blocks * 64);
    src.iota();
    connect_pair(a, b, src, dst);
    std::vector<std::thread> ts;
    std::atomic<int> ok{0};
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        nixl::xfer_list<nixl::dram_t> l, r;
        for (int i = 0; i < blocks; ++i) {
          l.push_back({src.addr((t * blocks + i) * 64), 64, 0});
          r.push_back({dst.addr((t * blocks + i) * 64), 64, 0});
        }
        for (int rep = 0; rep < 20; ++rep) {
          auto q = a.create_request(xfer_op::write, l, r, "b", {.notif = "t"});
          if (q.post() == status::success) ++ok;
          (void)a.check_remote_metadata("b");
        }
      });
    for (auto& t : ts) t.join();
    CHECK(ok == threads * 20);
    CHECK(src.bytes == dst.bytes);
    CHECK(b.notifications()["a"].size() == threads * 20);
  }
}

TEST_CASE("make_connection and query_memory errors") {
  pair_fixture<> f;
  CHECK(code_of([&] { f.a.make_connection("target"); }) == status::not_found);
  f.exchange();
  CHECK(code_of([&] { f.a.make_connection("target"); }) == status::success);
  CHECK(code_of([&] { (void)f.a.query_memory(nixl::reg_dlist{}, {}); }) == status::invalid_param);
  CHECK(code_of([&] { (void)f.a.query_memory(nixl::reg_dlist{}, {{"MEMCPY"}}); }) ==
        status::not_supported);
}

namespace {
/// A backend that asks to be tried first (nixl::prefers) and refuses peers named "far" with
/// not_supported, as the CUDA backend refuses peers on another host.
class picky_backend : public memcpy_backend {
 public:
  static constexpr std::string_view name = "PICKY";
  static constexpr bool prefers(nixl::mem_kind, nixl::mem_kind) noexcept { return true; }
  using memcpy_backend::memcpy_backend;
  void prepare(request& r, xfer_op op, std::span<const nixl::bound_desc<region>> local,
               std::span<const nixl::bound_desc<remote_region>> remote, peer& p) {
    if (p.name == "far")
      nixl::raise(status::not_supported, "PICKY: agent '{}' is out of reach", p.name);
    memcpy_backend::prepare(r, op, local, remote, p);
  }
};
}  // namespace

TEST_CASE("a preferring backend goes first; its not_supported passes the request on") {
  using two = nixl::agent<memcpy_backend, picky_backend>;
  static_assert(nixl::prefers<picky_backend>(nixl::mem_kind::dram, nixl::mem_kind::dram));
  static_assert(!nixl::prefers<memcpy_backend>(nixl::mem_kind::dram, nixl::mem_kind::dram));
  two a("initiator"), near("near"), far("far");
  for (two* x : {&a, &near, &far}) {
    x->create_backend<memcpy_backend>();
    x->create_backend<picky_backend>();
  }
  buffer src(256), dst(256, 0), dst2(256, 0);
  src.iota();
  a.register_memory(src.reg());
  near.register_memory(dst.reg());
  far.register_memory(dst2.reg());
  a.load_remote_metadata(near.local_metadata());
  a.load_remote_metadata(far.local_metadata());
  // run-time lists: the agent chooses the backend per request (typed lists choose at compile time)
  auto rt = [](const nixl::xfer_list<nixl::dram_t>& l) -> nixl::xfer_dlist { return l; };

  auto r1 = a.create_request(xfer_op::write, rt(src.blocks(4, 64)), rt(dst.blocks(4, 64)), "near");
  CHECK(r1.backend_name() == "PICKY");  // preferred, although second in the type list
  CHECK(r1.post() == status::success);
  CHECK(src.bytes == dst.bytes);

  auto r2 = a.create_request(xfer_op::write, rt(src.blocks(4, 64)), rt(dst2.blocks(4, 64)), "far");
  CHECK(r2.backend_name() == "MEMCPY");  // PICKY refused: the next candidate took it
  CHECK(r2.post() == status::success);
  CHECK(src.bytes == dst2.bytes);

  // named explicitly, the refusal reaches the caller
  CHECK(code_of([&] {
          (void)a.create_request(xfer_op::write, rt(src.blocks(4, 64)), rt(dst2.blocks(4, 64)),
                                 "far", {.backends = {"PICKY"}});
        }) == status::not_supported);
  CHECK(a.create_request(xfer_op::write, rt(src.blocks(4, 64)), rt(dst.blocks(4, 64)), "near",
                         {.backends = {"MEMCPY"}})
            .backend_name() == "MEMCPY");
}
