#include <nixl/memory.hpp>

#include "nixl_test/catch.hpp"

using nixl::desc;

TEST_CASE("mem_kind uses NIXL's numbering") {
  STATIC_REQUIRE(static_cast<int>(nixl::mem_kind::dram) == 0);
  STATIC_REQUIRE(static_cast<int>(nixl::mem_kind::vram) == 1);
  STATIC_REQUIRE(static_cast<int>(nixl::mem_kind::block) == 2);
  STATIC_REQUIRE(static_cast<int>(nixl::mem_kind::object) == 3);
  STATIC_REQUIRE(static_cast<int>(nixl::mem_kind::file) == 4);
  CHECK(nixl::nixl_name(nixl::mem_kind::block) == "BLK_SEG");
  CHECK(nixl::valid_kind(4));
  CHECK_FALSE(nixl::valid_kind(5));
}

TEST_CASE("visit_kind maps run-time kinds to tags and refuses unknown ones") {
  auto v = nixl::visit_kind(nixl::mem_kind::file, [](auto tag) { return decltype(tag)::value; });
  CHECK(v == nixl::mem_kind::file);
  CHECK_THROWS_AS(nixl::visit_kind(static_cast<nixl::mem_kind>(9), [](auto) { return 0; }),
                  nixl::error);
}

TEST_CASE("desc is 24 bytes, ordered by device then address then length") {
  STATIC_REQUIRE(sizeof(desc) == 24);
  CHECK(desc{100, 10, 0} < desc{50, 10, 1});
  CHECK(desc{50, 10, 1} < desc{60, 10, 1});
  CHECK(desc{60, 5, 1} < desc{60, 10, 1});
  desc r{1000, 100, 2};
  CHECK(r.covers(desc{1000, 100, 2}));
  CHECK(r.covers(desc{1050, 50, 2}));
  CHECK_FALSE(r.covers(desc{1050, 51, 2}));
  CHECK_FALSE(r.covers(desc{1000, 10, 3}));
  CHECK(r.overlaps(desc{1099, 10, 2}));
  CHECK_FALSE(r.overlaps(desc{1100, 10, 2}));
  // end() saturates instead of wrapping
  desc huge{~std::uintptr_t{0} - 5, 100, 0};
  CHECK(huge.end() == ~std::uintptr_t{0});
}

TEST_CASE("descriptor lists") {
  nixl::xfer_list<nixl::dram_t> l{{1, 2, 0}, {3, 4, 0}};
  CHECK(l.kind() == nixl::mem_kind::dram);
  CHECK(l.size() == 2);
  CHECK(l.index_of(desc{3, 4, 0}) == 1u);
  CHECK_FALSE(l.index_of(desc{3, 5, 0}).has_value());
  CHECK_THROWS_AS(l.erase(7), nixl::error);
  l.erase(0);
  CHECK(l.size() == 1);
  nixl::reg_dlist r(nixl::mem_kind::file, {{{0, 0, 7}, "/tmp/x"}});
  auto t = r.trim();
  CHECK(t.kind() == nixl::mem_kind::file);
  CHECK(t[0] == desc{0, 0, 7});
  const nixl::xfer_dlist& dyn = l;  // typed lists are run-time lists too
  CHECK(dyn.size() == 1);
}
