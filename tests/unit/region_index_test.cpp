#include <nixl/detail/region_index.hpp>

#include <random>

#include "nixl_test/catch.hpp"

using nixl::desc;
using index_t = nixl::detail::region_index<int>;

TEST_CASE("covering lookup finds the region that holds a range") {
  index_t idx(nixl::mem_kind::dram);
  idx.insert(desc{1000, 100, 0}, "", "", 1);
  idx.insert(desc{2000, 100, 0}, "", "", 2);
  idx.insert(desc{1000, 100, 1}, "", "", 3);
  CHECK(*idx.find_covering(desc{1000, 100, 0})->region == 1);
  CHECK(*idx.find_covering(desc{2050, 50, 0})->region == 2);
  CHECK(*idx.find_covering(desc{1010, 10, 1})->region == 3);
  CHECK(idx.find_covering(desc{1090, 20, 0}) == nullptr);    // crosses the end
  CHECK(idx.find_covering(desc{1100, 900, 0}) == nullptr);   // between regions
  CHECK(idx.find_covering(desc{1000, 10, 2}) == nullptr);    // other device
  CHECK(idx.find_covering(desc{999, 2, 0}) == nullptr);      // starts before
  CHECK(idx.find_covering(desc{1150, 1000, 0}) == nullptr);  // spans two regions
}

TEST_CASE("overlapping and nested regions are handled") {
  index_t idx(nixl::mem_kind::dram);
  idx.insert(desc{0, 1000, 0}, "", "", 1);  // big
  idx.insert(desc{100, 10, 0}, "", "", 2);  // nested
  idx.insert(desc{200, 10, 0}, "", "", 3);  // nested
  // Starts after the nested ones: only the big region covers it.
  CHECK(*idx.find_covering(desc{500, 400, 0})->region == 1);
  CHECK(*idx.find_covering(desc{205, 5, 0})->region == 3);
}

TEST_CASE("length 0 is unbounded for file kinds only") {
  index_t files(nixl::mem_kind::file);
  files.insert(desc{0, 0, 5}, "/tmp/a", "", 7);
  CHECK(files.find_covering(desc{1ull << 40, 4096, 5}) != nullptr);
  CHECK(files.find_exact(desc{0, 0, 5}) != nullptr);  // deregistration by the original entry
  CHECK(files.erase(desc{0, 0, 5}) != nullptr);
  CHECK(files.empty());
  index_t dram(nixl::mem_kind::dram);
  CHECK(dram.normalise(desc{0, 0, 0}).len == 0);
}

TEST_CASE("index agrees with a linear scan on random layouts") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; ++round) {
    index_t idx(nixl::mem_kind::dram);
    std::vector<desc> regs;
    for (int i = 0; i < 50; ++i) {
      desc d{rng() % 10000, 1 + rng() % 500, rng() % 3};
      if (idx.find_exact(d)) continue;
      idx.insert(d, "", "", i);
      regs.push_back(d);
    }
    for (int q = 0; q < 500; ++q) {
      desc x{rng() % 10500, 1 + rng() % 300, rng() % 3};
      bool linear = false;
      for (const auto& r : regs) linear = linear || r.covers(x);
      const auto* e = idx.find_covering(x);
      REQUIRE((e != nullptr) == linear);
      if (e) REQUIRE(e->range.covers(x));
    }
  }
}
