// Deregistration while prepared lists or requests use the memory, peers dropped as dead, and the
// backend filters of make_connection and notifications.
#include <nixl/agent.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::xfer_op;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const nixl::error& e) {
    return e.what();
  }
  return {};
}

/// Registers `src` with the initiator and `dst` with the target, and exchanges metadata.
void register_both(pair_fixture<>& f, const buffer& src, const buffer& dst) {
  f.a.register_memory(src.reg());
  f.b.register_memory(dst.reg());
  f.exchange();
}

}  // namespace

TEST_CASE("deregister-then-release: memory a request uses is refused until it is released") {
  pair_fixture<> f;
  buffer src(1024), dst(1024);
  register_both(f, src, dst);
  auto& engine = f.a.get_backend<memcpy_backend>();
  auto req = f.a.create_request(xfer_op::write, src.blocks(4, 256), dst.blocks(4, 256), "target");
  CHECK(code_of([&] { f.a.deregister_memory(src.reg()); }) == status::not_allowed);
  const auto msg = message_of([&] { f.a.deregister_memory(src.reg()); });
  CHECK(msg.find("entry 0") != std::string::npos);
  CHECK(msg.find("release") != std::string::npos);
  CHECK(engine.registered() == 1);  // nothing was deregistered
  // the request still works: its region is intact
  CHECK(req.post() == status::success);
  // moving the request keeps the registration pinned
  auto moved = std::move(req);
  CHECK(code_of([&] { f.a.deregister_memory(src.reg()); }) == status::not_allowed);
  CHECK(moved.release() == status::success);
  f.a.deregister_memory(src.reg());
  CHECK(engine.registered() == 0);
}

TEST_CASE("release-then-deregister: a released request and list leave nothing pinned") {
  pair_fixture<> f;
  buffer src(1024), dst(1024);
  register_both(f, src, dst);
  {
    auto lp = f.a.prepare_list(src.blocks(4, 256));
    auto rp = f.a.prepare_list("target", dst.blocks(4, 256));
    std::vector<int> idx{0, 1, 2, 3};
    auto req = f.a.make_request(xfer_op::write, lp, idx, rp, idx);
    CHECK(req.post() == status::success);
    CHECK(req.release() == status::success);
    // the prepared list alone still pins the memory
    CHECK(code_of([&] { f.a.deregister_memory(src.reg()); }) == status::not_allowed);
  }
  f.a.deregister_memory(src.reg());
  CHECK(f.a.get_backend<memcpy_backend>().registered() == 0);
}

TEST_CASE("a request made from prepared lists pins after the lists are gone") {
  pair_fixture<> f;
  buffer src(512), dst(512);
  register_both(f, src, dst);
  std::vector<int> idx{0};
  std::optional<typename test_agent::xfer_request> req;
  {
    auto lp = f.a.prepare_list(src.whole());
    auto rp = f.a.prepare_list("target", dst.whole());
    req.emplace(f.a.make_request(xfer_op::write, lp, idx, rp, idx));
  }
  CHECK(code_of([&] { f.a.deregister_memory(src.reg()); }) == status::not_allowed);
  req.reset();
  f.a.deregister_memory(src.reg());
}

TEST_CASE("a request past the inline storage (many descriptors, three regions) pins each region") {
  pair_fixture<> f;
  // Three source regions, one target region; 24 descriptors (more than a call keeps inline),
  // kept apart so that none merge, taken from the three regions in turn.
  std::vector<buffer> srcs;
  for (int i = 0; i < 3; ++i) srcs.emplace_back(1024, static_cast<unsigned char>(i + 1));
  buffer dst(24 * 64);
  for (const auto& b : srcs) f.a.register_memory(b.reg());
  f.b.register_memory(dst.reg());
  f.exchange();
  nixl::xfer_list<nixl::dram_t> l, r;
  for (std::size_t i = 0; i < 24; ++i) {
    l.push_back({srcs[i % 3].addr((i / 3) * 128), 64, 0});
    r.push_back({dst.addr(i * 64), 64, 0});
  }
  auto typed = f.a.create_request(xfer_op::write, l, r, "target", {.skip_merge = true});
  auto dynamic =
      f.a.create_request(xfer_op::write, static_cast<const nixl::xfer_dlist&>(l),
                         static_cast<const nixl::xfer_dlist&>(r), "target", {.skip_merge = true});
  CHECK(typed.descriptor_count() == 24);
  CHECK(dynamic.descriptor_count() == 24);
  CHECK(dynamic.post() == status::success);
  for (std::size_t i = 0; i < 24; ++i) CHECK(dst.bytes[i * 64] == i % 3 + 1);
  for (const auto& b : srcs)
    CHECK(code_of([&] { f.a.deregister_memory(b.reg()); }) == status::not_allowed);
  CHECK(code_of([&] { f.b.deregister_memory(dst.reg()); }) == status::success);  // the peer's own
  CHECK(typed.release() == status::success);
  for (const auto& b : srcs)  // the other request still pins every region
    CHECK(code_of([&] { f.a.deregister_memory(b.reg()); }) == status::not_allowed);
  CHECK(dynamic.release() == status::success);
  for (const auto& b : srcs) f.a.deregister_memory(b.reg());
  CHECK(f.a.get_backend<memcpy_backend>().registered() == 0);
}

TEST_CASE("a released request reaches nothing; requests made after it work and pin anew") {
  pair_fixture<> f;
  buffer src(1024), dst(1024);
  src.iota();
  register_both(f, src, dst);
  for (int round = 0; round < 3; ++round) {
    auto req = f.a.create_request(xfer_op::write, static_cast<const nixl::xfer_dlist&>(src.whole()),
                                  dst.whole(), "target", {.notif = "round"});
    CHECK(req.post() == status::success);
    CHECK(req.release() == status::success);
    // released: no backend, no peer, no pins behind it
    CHECK_FALSE(req.valid());
    CHECK(req.post() == status::invalid_param);
    CHECK(req.status() == status::invalid_param);
    CHECK(req.release() == status::success);  // releasing again is harmless
    CHECK(req.remote_agent().empty());
    f.a.deregister_memory(src.reg());  // nothing pinned
    f.a.register_memory(src.reg());
  }
  CHECK(src.bytes == dst.bytes);
  CHECK(f.b.notifications()["initiator"].size() == 3);
}

TEST_CASE("a batch with one entry in use deregisters nothing; other memory is free") {
  test_agent a("batch");
  a.create_backend<memcpy_backend>();
  buffer x(256), y(256), z(256);
  nixl::reg_list<nixl::dram_t> both{{{x.addr(), 256, 0}, ""}, {{y.addr(), 256, 0}, ""}};
  a.register_memory(both);
  a.register_memory(z.reg());
  auto r = a.create_request(xfer_op::write, x.whole(), y.whole(), "batch");  // loopback
  CHECK(code_of([&] { a.deregister_memory(both); }) == status::not_allowed);
  CHECK(a.get_backend<memcpy_backend>().registered() == 3);
  a.deregister_memory(z.reg());  // not used by anything
  // the loopback target (y) alone is pinned too, through the agent's view of itself
  nixl::reg_list<nixl::dram_t> only_y{{{y.addr(), 256, 0}, ""}};
  CHECK(code_of([&] { a.deregister_memory(only_y); }) == status::not_allowed);
  CHECK(r.post() == status::success);
  CHECK(x.bytes == y.bytes);
  CHECK(r.release() == status::success);
  a.deregister_memory(both);
  CHECK(a.get_backend<memcpy_backend>().registered() == 0);
}

TEST_CASE("telemetry counts the descriptors after merging, as the backend gets them") {
  test_agent a("a", {.capture_telemetry = true}), b("b");
  a.create_backend<memcpy_backend>();
  b.create_backend<memcpy_backend>();
  buffer src(1024), dst(1024);
  a.register_memory(src.reg());
  b.register_memory(dst.reg());
  a.load_remote_metadata(b.local_metadata());
  auto r = a.create_request(xfer_op::write, src.blocks(4, 256), dst.blocks(4, 256), "b");
  CHECK(r.descriptor_count() == 1);  // contiguous on both sides: merged
  CHECK(r.post() == status::success);
  nixl::xfer_telemetry t;
  REQUIRE(r.telemetry(t) == status::success);
  CHECK(t.desc_count == 1);
  CHECK(t.total_bytes == 1024);
}

TEST_CASE("a peer dropped as disconnected is removed quietly, once") {
  test_agent a("a");
  a.create_backend<memcpy_backend>();
  auto b = std::make_unique<test_agent>("b");
  b->create_backend<memcpy_backend>();
  auto c = std::make_unique<test_agent>("c");
  c->create_backend<memcpy_backend>();
  buffer src(64), dst(64);
  a.register_memory(src.reg());
  b->register_memory(dst.reg());
  a.load_remote_metadata(b->local_metadata());
  a.load_remote_metadata(c->local_metadata());
  auto r = a.create_request(xfer_op::write, src.whole(), dst.whole(), "b");
  b.reset();
  CHECK(r.post() == status::remote_disconnect);
  CHECK_FALSE(a.check_remote_metadata("b"));  // dropped by the agent
  // a shutdown loop over every peer it loaded goes through
  for (const char* peer : {"b", "c"}) a.invalidate_remote_metadata(peer);
  CHECK(code_of([&] { a.invalidate_remote_metadata("b"); }) == status::not_found);
  CHECK(code_of([&] { a.invalidate_remote_metadata("c"); }) == status::not_found);
  CHECK(code_of([&] { a.invalidate_remote_metadata("never"); }) == status::not_found);
  CHECK(code_of([&] { a.invalidate_remote_metadata("a"); }) == status::invalid_param);
}

TEST_CASE("make_connection and notifications honour the backends named") {
  test_agent a("a"), b("b");
  a.create_backend<memcpy_backend>();
  a.create_backend("TESTFILE");
  b.create_backend<memcpy_backend>();
  a.load_remote_metadata(b.local_metadata());
  b.load_remote_metadata(a.local_metadata());
  a.make_connection("b");
  a.make_connection("b", {{"MEMCPY"}});
  CHECK(code_of([&] { a.make_connection("b", {{"TESTFILE"}}); }) == status::backend);
  CHECK(code_of([&] { a.make_connection("nobody"); }) == status::not_found);
  b.notify("a", "hello");
  nixl::notif_map m;
  CHECK(code_of([&] { a.notifications(m, {{"TESTFILE"}}); }) == status::backend);
  CHECK(m.empty());
  a.notifications(m, {{"MEMCPY"}});
  REQUIRE(m["b"].size() == 1);
  CHECK(m["b"][0] == "hello");
}
