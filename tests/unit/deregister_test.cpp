// Deregistration while prepared lists or requests point into the memory (NIXL's: it succeeds),
// peers dropped as dead, and the backend filters of make_connection and notifications.
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

TEST_CASE(
    "deregistering memory a finished request uses succeeds; the request fails its next post") {
  pair_fixture<> f;
  buffer src(1024), dst(1024), other(256);
  register_both(f, src, dst);
  auto& engine = f.a.get_backend<memcpy_backend>();
  auto req = f.a.create_request(xfer_op::write, src.blocks(4, 256), dst.blocks(4, 256), "target");
  CHECK(req.post() == status::success);
  CHECK(code_of([&] { f.a.deregister_memory(src.reg()); }) == status::success);  // as NIXL
  CHECK(engine.registered() == 1);  // the backend keeps it while the request holds it
  CHECK(req.post() == status::not_found);
  CHECK(req.status() == status::not_found);
  auto moved = std::move(req);  // moving keeps both the failure and the registration
  CHECK(moved.post() == status::not_found);
  CHECK(engine.registered() == 1);
  // a second deregistration of the same memory: it is no longer registered
  CHECK(code_of([&] { f.a.deregister_memory(src.reg()); }) == status::not_found);
  CHECK(moved.release() == status::success);
  f.a.register_memory(other.reg());  // the next registration call lets the backend's go
  CHECK(engine.registered() == 1);
  // registering the same memory again gives fresh requests that work
  f.a.register_memory(src.reg());
  auto again = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  CHECK(again.post() == status::success);
}

TEST_CASE("a request in flight keeps the backend registration until it completes and is released") {
  pair_fixture<> f(nixl::params{{"delay_polls", "3"}});
  buffer src(1024), dst(1024), other(256);
  src.iota();
  register_both(f, src, dst);
  auto& engine = f.a.get_backend<memcpy_backend>();
  auto req = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  CHECK(req.post() == status::in_progress);
  f.a.deregister_memory(src.reg());  // never refused
  CHECK(engine.registered() == 1);
  CHECK(wait(req) == status::success);  // it completes on the registration it was posted with
  CHECK(src.bytes == dst.bytes);
  CHECK(req.post() == status::not_found);  // but is not posted again
  f.a.register_memory(other.reg());
  CHECK(engine.registered() == 2);  // still held by the request
  CHECK(req.release() == status::success);
  f.a.deregister_memory(other.reg());
  CHECK(engine.registered() == 0);
}

TEST_CASE("prepared lists into deregistered memory: make_request refuses them, requests fail") {
  pair_fixture<> f;
  buffer src(1024), dst(1024);
  register_both(f, src, dst);
  auto& engine = f.a.get_backend<memcpy_backend>();
  std::vector<int> idx{0, 1, 2, 3};
  std::optional<typename test_agent::xfer_request> req;
  {
    auto lp = f.a.prepare_list(src.blocks(4, 256));
    auto rp = f.a.prepare_list("target", dst.blocks(4, 256));
    req.emplace(f.a.make_request(xfer_op::write, lp, idx, rp, idx));
    CHECK(req->post() == status::success);
    f.a.deregister_memory(src.reg());
    CHECK(engine.registered() == 1);
    CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, idx, rp, idx); }) ==
          status::not_found);
    const auto msg = message_of([&] { f.a.make_request(xfer_op::write, lp, idx, rp, idx); });
    CHECK(msg.find("deregistered") != std::string::npos);
    CHECK(req->post() == status::not_found);
  }
  CHECK(engine.registered() == 1);  // the request made from the lists still holds it
  req.reset();
  f.a.register_memory(src.reg());
  CHECK(engine.registered() == 1);  // the retired one went, the new one is there
}

TEST_CASE(
    "a request past the inline storage (many descriptors, three regions) fails when any goes") {
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
  CHECK(typed.post() == status::success);
  f.a.deregister_memory(srcs[2].reg());  // the last of the three
  CHECK(typed.post() == status::not_found);
  CHECK(dynamic.post() == status::not_found);
  CHECK(f.a.get_backend<memcpy_backend>().registered() == 3);
  CHECK(typed.release() == status::success);
  CHECK(dynamic.release() == status::success);
  for (int i = 0; i < 2; ++i) f.a.deregister_memory(srcs[static_cast<std::size_t>(i)].reg());
  CHECK(f.a.get_backend<memcpy_backend>().registered() == 0);
}

TEST_CASE("a released request reaches nothing; requests made after it work") {
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
    f.a.deregister_memory(src.reg());
    CHECK(f.a.get_backend<memcpy_backend>().registered() == 0);  // nothing held it
    f.a.register_memory(src.reg());
  }
  CHECK(src.bytes == dst.bytes);
  CHECK(f.b.notifications()["initiator"].size() == 3);
}

TEST_CASE("loopback: deregistering a request's target goes through; the request fails") {
  test_agent a("batch");
  a.create_backend<memcpy_backend>();
  buffer x(256), y(256), z(256);
  x.iota();
  nixl::reg_list<nixl::dram_t> both{{{x.addr(), 256, 0}, ""}, {{y.addr(), 256, 0}, ""}};
  a.register_memory(both);
  a.register_memory(z.reg());
  auto r = a.create_request(xfer_op::write, x.whole(), y.whole(), "batch");  // loopback
  CHECK(r.post() == status::success);
  CHECK(x.bytes == y.bytes);
  // the loopback target (y) alone: held through the agent's view of itself
  nixl::reg_list<nixl::dram_t> only_y{{{y.addr(), 256, 0}, ""}};
  a.deregister_memory(only_y);
  CHECK(a.get_backend<memcpy_backend>().registered() == 3);
  CHECK(r.post() == status::not_found);
  CHECK(r.release() == status::success);
  a.deregister_memory(z.reg());
  CHECK(a.get_backend<memcpy_backend>().registered() == 1);  // x only
  nixl::reg_list<nixl::dram_t> only_x{{{x.addr(), 256, 0}, ""}};
  a.deregister_memory(only_x);
  CHECK(a.get_backend<memcpy_backend>().registered() == 0);
}

TEST_CASE("telemetry counts descriptors as NIXL: the caller's one-shot, the merged prepared") {
  test_agent a("a", {.capture_telemetry = true}), b("b");
  a.create_backend<memcpy_backend>();
  b.create_backend<memcpy_backend>();
  buffer src(1024), dst(1024);
  connect_pair(a, b, src, dst);
  auto r = a.create_request(xfer_op::write, src.blocks(4, 256), dst.blocks(4, 256), "b");
  CHECK(r.descriptor_count() == 1);  // contiguous on both sides: merged
  CHECK(r.post() == status::success);
  nixl::xfer_telemetry t;
  REQUIRE(r.telemetry(t) == status::success);
  CHECK(t.desc_count == 4);  // one-shot: the caller's count
  CHECK(t.total_bytes == 1024);
  auto lp = a.prepare_list("", src.blocks(4, 256));
  auto rp = a.prepare_list("b", dst.blocks(4, 256));
  const std::vector<int> idx{0, 1, 2, 3};
  auto p = a.make_request(xfer_op::write, lp, idx, rp, idx);
  CHECK(p.descriptor_count() == 1);
  CHECK(p.post() == status::success);
  REQUIRE(p.telemetry(t) == status::success);
  CHECK(t.desc_count == 1);  // prepared: the merged count
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
