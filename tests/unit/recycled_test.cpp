#include <nixl/detail/recycled.hpp>
#include <nixl/detail/resolve.hpp>

#include <vector>

#include "nixl_test/catch.hpp"

using nixl::detail::block_cache;
using nixl::detail::recycling_allocator;

TEST_CASE("block cache: a freed large block serves the next one of about its size") {
  auto& c = block_cache::get();
  const std::size_t size = (std::size_t{1} << 20) + 7 * 4096;  // a size nothing else uses
  void* big = c.take(size);
  c.give(big, size);
  CHECK(c.kept().first >= 1);
  // a 64 KiB request does not take it (it would hold 16 times its size); the same size does
  void* small = c.take(std::size_t{64} << 10);
  CHECK(small != big);
  void* again = c.take(size);
  CHECK(again == big);
  c.give(again, size);
  c.give(small, std::size_t{64} << 10);
  // bounds: never more than max_blocks blocks or max_bytes bytes; oversized blocks are freed
  std::vector<void*> many;
  for (std::size_t i = 0; i < block_cache::max_blocks + 4; ++i)
    many.push_back(c.take(std::size_t{4} << 20));
  for (void* p : many) c.give(p, std::size_t{4} << 20);
  CHECK(c.kept().first <= block_cache::max_blocks);
  CHECK(c.kept().second <= block_cache::max_bytes);
  void* huge = c.take(block_cache::max_bytes + 1);
  const auto with = c.kept();
  c.give(huge, block_cache::max_bytes + 1);
  CHECK(c.kept() == with);
}

TEST_CASE("recycling allocator: vectors of any size keep their contents") {
  for (std::size_t n : {std::size_t{3}, std::size_t{100'000}, std::size_t{3'000'000}}) {
    std::vector<int, recycling_allocator<int>> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<int>(i));
    std::vector<int, recycling_allocator<int>> w = v;
    v.clear();
    v.shrink_to_fit();
    bool same = w.size() == n;
    for (std::size_t i = 0; i < w.size() && same; ++i) same = w[i] == static_cast<int>(i);
    CHECK(same);
  }
  nixl::detail::scratch_vector<long, 4> s;
  for (long i = 0; i < 200'000; ++i) s.push_back(i);
  CHECK(s.size() == 200'000);
  CHECK(s[199'999] == 199'999);
  CHECK(s[3] == 3);
}
