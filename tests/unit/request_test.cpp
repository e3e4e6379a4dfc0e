#include <nixl/agent.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include <stdlib.h>

#include "nixl_test/catch.hpp"
#include "nixl_test/fixtures.hpp"

#if defined(__GNUC__) && !defined(__clang__)
// operator delete below frees what operator new malloc'd; GCC cannot see that pairing.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// Counting allocator: every operator new in this test executable bumps the counter.
namespace {
std::atomic<long> g_allocs{0};
}
void* operator new(std::size_t n) {
  ++g_allocs;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++g_allocs;
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void* operator new(std::size_t n, std::align_val_t a) {
  ++g_allocs;
  void* p = nullptr;
  if (::posix_memalign(&p, std::max(sizeof(void*), static_cast<std::size_t>(a)), n == 0 ? 1 : n) !=
      0)
    throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return operator new(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

using namespace nixl::test;
using nixl::status;
using nixl::xfer_op;

namespace {
/// Registers `src` with the initiator and `dst` with the target; the initiator loads the target.
void connect_pair(pair_fixture<>& f, const buffer& src, const buffer& dst) {
  f.connect(src, dst);
}
}  // namespace

TEST_CASE("request state rules: not posted, repost only when not in progress, sticky status") {
  pair_fixture<> f(nixl::params{{"delay_polls", "3"}});
  buffer src(64), dst(64);
  src.iota();
  connect_pair(f, src, dst);
  auto r = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  CHECK(r.status() == status::not_posted);
  CHECK(r.post() == status::in_progress);
  CHECK(r.post() == status::repost_active);  // one check consumed, still running
  CHECK(wait(r) == status::success);
  CHECK(r.status() == status::success);  // sticky
  CHECK(src.bytes == dst.bytes);
  CHECK(r.post() == status::in_progress);  // repost after completion is fine
  CHECK(wait(r) == status::success);
}

TEST_CASE("release cancels an in-flight request; an empty request refuses everything") {
  pair_fixture<> f(nixl::params{{"delay_polls", "1000"}});
  buffer src(64, 1), dst(64, 0);
  connect_pair(f, src, dst);
  auto r = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target", {.notif = "n"});
  CHECK(r.post() == status::in_progress);
  CHECK(r.release() == status::success);
  CHECK_FALSE(r.valid());
  CHECK(dst.bytes[0] == 0);                         // canceled before it ran
  CHECK(f.b.notifications()["initiator"].empty());  // and no notification
  CHECK(r.post() == status::invalid_param);
  nixl::test::test_agent::xfer_request empty;
  CHECK(empty.post() == status::invalid_param);
  CHECK(empty.status() == status::invalid_param);
  CHECK(empty.backend_name().empty());
}

TEST_CASE("post and status allocate nothing once the request exists") {
  pair_fixture<> f(nixl::params{{"delay_polls", "2"}});
  buffer src(4096), dst(4096);
  connect_pair(f, src, dst);
  auto typed = f.a.create_request(xfer_op::write, src.blocks(64, 64), dst.blocks(64, 64), "target",
                                  {.skip_merge = true});
  auto dynamic = f.a.create_request(
      xfer_op::write, static_cast<const nixl::xfer_dlist&>(src.whole()), dst.whole(), "target");
  const long before = g_allocs.load();
  for (int i = 0; i < 100; ++i) {
    REQUIRE(typed.post() == status::in_progress);
    REQUIRE(wait(typed) == status::success);
    REQUIRE(dynamic.post() == status::in_progress);
    REQUIRE(wait(dynamic) == status::success);
  }
  CHECK(g_allocs.load() - before == 0);
  // a notification that fits in the reserved capacity does not allocate either
  const long before_notif = g_allocs.load();
  REQUIRE(typed.post(std::string_view("short")) == status::in_progress);
  CHECK(g_allocs.load() - before_notif == 0);
  REQUIRE(wait(typed) == status::success);
}

TEST_CASE("making and releasing a short request allocates only the backend's own state") {
  pair_fixture<> f;
  buffer src(4096), dst(4096);
  connect_pair(f, src, dst);
  const auto l = src.blocks(4, 64);
  const auto r = dst.blocks(4, 64);
  (void)f.a.create_request(xfer_op::write, l, r, "target");  // warm: nothing lazily made
  for (int i = 0; i < 10; ++i) {
    const long before = g_allocs.load();
    {
      auto typed = f.a.create_request(xfer_op::write, l, r, "target", {.skip_merge = true});
      REQUIRE(typed.post() == status::success);
      auto dynamic = f.a.create_request(xfer_op::write, static_cast<const nixl::xfer_dlist&>(l), r,
                                        "target", {.skip_merge = true});
      REQUIRE(dynamic.post() == status::success);
      REQUIRE(dynamic.release() == status::success);
    }
    // one each: the MEMCPY backend's vector of operations; the agent adds nothing
    CHECK(g_allocs.load() - before == 2);
  }
}

TEST_CASE("a notification given at post fits in the capacity reserved at creation") {
  pair_fixture<> f(nixl::params{{"delay_polls", "1"}});
  buffer src(64), dst(64);
  connect_pair(f, src, dst);
  auto req = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target",
                                {.notif_capacity = 256});
  const std::string long_msg(200, 'n');
  const long before = g_allocs.load();
  REQUIRE(req.post(std::string_view(long_msg)) == status::in_progress);
  CHECK(g_allocs.load() - before == 0);
  REQUIRE(wait(req) == status::success);
  // without the reservation the first long message allocates, and a repost reuses it
  auto plain = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  const long first = g_allocs.load();
  REQUIRE(plain.post(std::string_view(long_msg)) == status::in_progress);
  CHECK(g_allocs.load() - first == 1);
  REQUIRE(wait(plain) == status::success);
  const long again = g_allocs.load();
  REQUIRE(plain.post(std::string_view(long_msg)) == status::in_progress);
  CHECK(g_allocs.load() - again == 0);
  REQUIRE(wait(plain) == status::success);
  CHECK(f.b.notifications()["initiator"].size() == 3);
}

TEST_CASE("requests are plain objects: no vtable anywhere on the hot path") {
  STATIC_REQUIRE_FALSE(std::is_polymorphic_v<nixl::request<memcpy_backend>>);
  STATIC_REQUIRE_FALSE(std::is_polymorphic_v<memcpy_backend>);
  STATIC_REQUIRE_FALSE(std::is_polymorphic_v<memcpy_backend::request>);
  STATIC_REQUIRE_FALSE(std::is_polymorphic_v<nixl::test::test_agent::xfer_request>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<nixl::request<memcpy_backend>>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<nixl::request<memcpy_backend>>);
}

TEST_CASE("moving a request keeps it usable") {
  pair_fixture<> f;
  buffer src(64, 5), dst(64, 0);
  connect_pair(f, src, dst);
  auto r = f.a.create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  auto moved = std::move(r);
  CHECK_FALSE(r.valid());
  CHECK(moved.post() == status::success);
  CHECK(dst.bytes[10] == 5);
  nixl::request<memcpy_backend> other;
  other = std::move(moved);
  CHECK(other.post() == status::success);
}

TEST_CASE("requests and prepared lists may outlive their agent") {
  buffer src(64, 1), dst(64, 0);
  auto a = std::make_unique<nixl::test::test_agent>("initiator");
  nixl::test::test_agent b{"target"};
  a->create_backend<memcpy_backend>(nixl::params{{"delay_polls", "1000"}});
  b.create_backend<memcpy_backend>();
  connect_pair(*a, b, src, dst);
  auto running =
      a->create_request(xfer_op::write, src.whole(), dst.whole(), "target", {.notif = "n"});
  REQUIRE(running.post() == status::in_progress);
  // moved, move-assigned and stalled requests keep their place on the agent's list
  auto made = a->create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  auto moved = std::move(made);
  nixl::request<memcpy_backend> assigned;
  assigned = a->create_request(xfer_op::write, src.whole(), dst.whole(), "target");
  auto stalled = a->create_request(xfer_op::write, src.whole(), dst.whole(), "target",
                                   {.stall_timeout = std::chrono::microseconds(1)});
  REQUIRE(stalled.post() == status::in_progress);
  CHECK(wait(stalled) == status::xfer_stalled);
  auto local = a->prepare_list(src.whole());
  auto remote = a->prepare_list("target", dst.whole());
  a.reset();
  for (auto* r : {&running, &moved, &assigned, &stalled}) {
    CHECK_FALSE(r->valid());
    CHECK(r->post() != status::in_progress);
    CHECK(r->status() != status::in_progress);
    CHECK(r->release() == status::success);
  }
  CHECK(running.status() == status::invalid_param);
  CHECK(dst.bytes[0] == 0);  // the running request was canceled with its agent, never ran
  CHECK(b.notifications()["initiator"].empty());
  CHECK_FALSE(made.valid());
}
