// The compile-time path: kinds known statically give requests typed on the chosen backend.
#include <nixl/agent.hpp>

#include <unistd.h>

#include "nixl_test/catch.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::xfer_op;

using file_first = nixl::agent<file_backend, memcpy_backend>;

TEST_CASE("backend selection is decided at compile time") {
  STATIC_REQUIRE(
      std::is_same_v<
          nixl::detail::select_backend_t<nixl::dram_t, nixl::dram_t, file_backend, memcpy_backend>,
          memcpy_backend>);
  STATIC_REQUIRE(
      std::is_same_v<
          nixl::detail::select_backend_t<nixl::dram_t, nixl::file_t, memcpy_backend, file_backend>,
          file_backend>);
}

TEST_CASE("typed create_request returns request<B> and moves data") {
  file_first a("a"), b("b");
  a.create_backend<memcpy_backend>();
  b.create_backend<memcpy_backend>();
  buffer src(256), dst(256);
  src.iota();
  connect_pair(a, b, src, dst);
  auto r = a.create_request(xfer_op::write, src.whole(), dst.whole(), "b");
  STATIC_REQUIRE(std::is_same_v<decltype(r), nixl::request<memcpy_backend>>);
  CHECK(r.post() == status::success);
  CHECK(src.bytes == dst.bytes);
  auto lp = a.prepare_list("", src.blocks(4, 64));
  auto rp = a.prepare_list("b", dst.blocks(4, 64));
  std::vector<int> idx{0, 1, 2, 3};
  auto m = a.make_request(xfer_op::read, lp, idx, rp, idx);
  STATIC_REQUIRE(std::is_same_v<decltype(m), nixl::request<memcpy_backend>>);
  CHECK(m.post() == status::success);
  CHECK(m.descriptor_count() == 1);
}

TEST_CASE("typed path with a backend that was not created fails clearly") {
  file_first a("a");
  a.create_backend<memcpy_backend>();
  buffer mem(64);
  a.register_memory(mem.reg());
  nixl::xfer_list<nixl::file_t> f{{0, 64, 3}};
  try {
    (void)a.create_request(xfer_op::write, mem.whole(), f, "a");
    FAIL("no throw");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == status::not_found);
    CHECK(std::string(e.what()).find("TESTFILE was not created") != std::string::npos);
  }
}
