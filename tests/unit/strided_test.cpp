// Strided lists (NIXL 1.5's strided descriptors) through the core agent: the same blocks as an
// expanded list, flat indices across runs, the span rule, invalid rows, O(rows) storage and
// pairing with expanded lists.
#include <nixl/agent.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::stride_desc;
using nixl::strided_dlist;
using nixl::xfer_op;

namespace {

/// Posts `r` and waits for it; its final status.
template <class R>
status run(R& r) {
  const status s = r.post();
  return s == status::in_progress ? wait(r) : s;
}

/// 0..n-1.
std::vector<int> iota_idx(std::size_t n, int first = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

/// Rows of three shapes: sparse, dense, sparse with a gap; 16 + 8 + 20 = 44 blocks.
strided_dlist rows_in(const buffer& b) {
  return strided_dlist(nixl::mem_kind::dram, {{b.addr(0), 256, 0, 1024, 16},
                                              {b.addr(20000), 64, 0, 64, 8},
                                              {b.addr(32768), 128, 0, 384, 20}});
}

}  // namespace

TEST_CASE("strided list: the count is known without expanding, expand() lists the blocks") {
  buffer b(64 * 1024);
  const auto l = rows_in(b);
  CHECK(l.size() == 44);
  CHECK(l.row_count() == 3);
  const auto e = l.expand();
  REQUIRE(e.size() == 44);
  CHECK(e[0] == nixl::desc{b.addr(0), 256, 0});
  CHECK(e[15] == nixl::desc{b.addr(15 * 1024), 256, 0});
  CHECK(e[16] == nixl::desc{b.addr(20000), 64, 0});
  CHECK(e[24] == nixl::desc{b.addr(32768), 128, 0});
  CHECK(e[43] == nixl::desc{b.addr(32768 + 19 * 384), 128, 0});
  CHECK(stride_desc{0, 8, 0, 8, 3}.span() == nixl::desc{0, 24, 0});
  CHECK(stride_desc{0, 8, 0, 100, 3}.span() == nixl::desc{0, 208, 0});  // not stride*count
  CHECK_FALSE(stride_desc{0, 8, 0, 4, 3}.valid());
  CHECK_FALSE(stride_desc{0, 0, 0, 4, 3}.valid());
  CHECK_FALSE(stride_desc{0, 8, 0, 8, 0}.valid());
  CHECK_FALSE(stride_desc{~std::uintptr_t{0} - 16, 8, 0, 8, 3}.valid());
}

TEST_CASE("strided and expanded lists of the same blocks move the same bytes") {
  pair_fixture f;
  buffer src(64 * 1024), dst1(64 * 1024), dst2(64 * 1024);
  src.iota(7);
  f.a.register_memory(src.reg());
  f.b.register_memory(dst1.reg());
  f.b.register_memory(dst2.reg());
  f.a.load_remote_metadata(f.b.local_metadata());

  const auto ls = rows_in(src);
  const auto rs = rows_in(dst1);
  auto lp = f.a.prepare_list(ls);
  auto rp = f.a.prepare_list("target", rs);
  CHECK(lp.strided());
  CHECK(lp.size() == 44);
  CHECK(rp.size() == 44);
  CHECK(lp.stored_count() == 3);
  CHECK(rp.backends() == std::vector<std::string_view>{"MEMCPY"});
  const auto all = iota_idx(44);
  auto req = f.a.make_request(xfer_op::write, lp, all, rp, all);
  CHECK(run(req) == status::success);
  // The dense run merges into one descriptor; the sparse ones do not: 16 + 1 + 20.
  CHECK(req.descriptor_count() == 37);

  auto le = f.a.prepare_list(ls.expand());
  auto re = f.a.prepare_list("target", rows_in(dst2).expand());
  CHECK_FALSE(le.strided());
  CHECK(le.stored_count() == 44);
  auto req2 = f.a.make_request(xfer_op::write, le, all, re, all);
  CHECK(run(req2) == status::success);
  CHECK(req2.descriptor_count() == 37);
  CHECK(dst1.bytes == dst2.bytes);
  // Every block arrived, nothing else changed.
  std::vector<unsigned char> want(src.bytes.size(), 0);
  for (const auto& d : ls.expand()) {
    const auto off = d.addr - src.addr();
    std::memcpy(want.data() + off, src.bytes.data() + off, d.len);
  }
  CHECK(dst1.bytes == want);
}

TEST_CASE("strided list: flat indices cross runs in row order, in any order of the request") {
  pair_fixture f;
  buffer src(64 * 1024), dst(64 * 1024);
  src.iota(1);
  f.connect(src, dst);
  const auto ls = rows_in(src);
  auto lp = f.a.prepare_list(ls);
  // The remote side: 44 blocks of 256 bytes, expanded; only the first len bytes are written.
  const auto blocks = ls.expand();
  nixl::xfer_dlist rl(nixl::mem_kind::dram);
  for (std::size_t j = 0; j < blocks.size(); ++j)
    rl.push_back({dst.addr(j * 256), blocks[j].len, 0});
  auto rp = f.a.prepare_list("target", rl);
  // Descending, then a jump back into the first run and across all three.
  std::vector<int> li{43, 42, 30, 24, 23, 16, 15, 0, 17, 5, 40};
  std::vector<int> ri = li;
  auto req = f.a.make_request(xfer_op::write, lp, li, rp, ri);
  CHECK(run(req) == status::success);
  for (const int i : li) {
    const auto& d = blocks[static_cast<std::size_t>(i)];
    CHECK(std::equal(src.bytes.begin() + static_cast<std::ptrdiff_t>(d.addr - src.addr()),
                     src.bytes.begin() + static_cast<std::ptrdiff_t>(d.addr - src.addr() + d.len),
                     dst.bytes.begin() + i * 256));
  }
  // Out of range of the flat space.
  std::vector<int> bad{44};
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, bad, rp, std::vector<int>{0}); }) ==
        status::invalid_param);
}

TEST_CASE("strided list: a run's span lies in one registered region, else not_found") {
  pair_fixture f;
  buffer mem(8192), dst(8192);
  // Two regions, back to back.
  f.a.register_memory(nixl::reg_dlist(
      nixl::mem_kind::dram, {{{mem.addr(0), 4096, 0}, ""}, {{mem.addr(4096), 4096, 0}, ""}}));
  f.b.register_memory(dst.reg());
  f.a.load_remote_metadata(f.b.local_metadata());
  using L = strided_dlist;
  const auto dram = nixl::mem_kind::dram;
  // Span (count-1)*stride + len = 3*1024 + 1024 ends exactly at the first region's end.
  CHECK(f.a.prepare_list(L(dram, {{mem.addr(0), 1024, 0, 1024, 4}})).size() == 4);
  // 3*1300 + 100 = 4000 < 4096 although stride*count = 5200 passes the end.
  CHECK(f.a.prepare_list(L(dram, {{mem.addr(0), 100, 0, 1300, 4}})).size() == 4);
  // Straddling both regions: no single region covers it.
  CHECK(code_of([&] {
          (void)f.a.prepare_list(L(dram, {{mem.addr(2048), 1024, 0, 1024, 4}}));
        }) == status::not_found);
  // One row fine, the next outside: the whole list is refused.
  CHECK(code_of([&] {
          (void)f.a.prepare_list(
              L(dram, {{mem.addr(0), 64, 0, 64, 4}, {mem.addr(8000), 64, 0, 256, 2}}));
        }) == status::not_found);
  // The remote side follows the same rule against the peer's regions.
  CHECK(f.a.prepare_list("target", L(dram, {{dst.addr(0), 512, 0, 1024, 8}})).size() == 8);
  CHECK(code_of([&] {
          (void)f.a.prepare_list("target", L(dram, {{dst.addr(0), 512, 0, 1024, 9}}));
        }) == status::not_found);
  CHECK(code_of([&] {
          (void)f.a.prepare_list("nobody", L(dram, {{dst.addr(0), 8, 0, 8, 1}}));
        }) == status::not_found);
}

TEST_CASE("strided list: invalid rows and an empty list give not_found; lengths must pair") {
  pair_fixture f;
  buffer src(8192), dst(8192);
  f.connect(src, dst);
  using L = strided_dlist;
  const auto dram = nixl::mem_kind::dram;
  for (const stride_desc& bad : {stride_desc{src.addr(), 64, 0, 64, 0},     // count 0
                                 stride_desc{src.addr(), 0, 0, 64, 4},      // len 0
                                 stride_desc{src.addr(), 64, 0, 32, 4}}) {  // stride < len
    CHECK(code_of([&] { (void)f.a.prepare_list(L(dram, {bad})); }) == status::not_found);
    CHECK(code_of([&] { (void)f.a.prepare_list("target", L(dram, {bad})); }) == status::not_found);
  }
  CHECK(code_of([&] { (void)f.a.prepare_list(L(dram)); }) == status::not_found);

  auto lp = f.a.prepare_list(L(dram, {{src.addr(), 256, 0, 512, 4}}));
  auto rp = f.a.prepare_list("target", L(dram, {{dst.addr(), 128, 0, 128, 4}}));
  const auto idx = iota_idx(4);
  CHECK(code_of([&] { f.a.make_request(xfer_op::write, lp, idx, rp, idx); }) ==
        status::invalid_param);
}

TEST_CASE("strided list: storage is O(rows) whatever the block count; dense runs merge") {
  pair_fixture f;
  constexpr std::size_t n = 100000, blk = 16;
  buffer src(n * blk), dst(n * blk);
  src.iota(5);
  f.connect(src, dst);
  const auto dram = nixl::mem_kind::dram;
  auto lp = f.a.prepare_list(strided_dlist(dram, {{src.addr(), blk, 0, blk, n}}));
  auto rp = f.a.prepare_list("target", strided_dlist(dram, {{dst.addr(), blk, 0, blk, n}}));
  CHECK(lp.size() == n);
  CHECK(lp.stored_count() == 1);
  CHECK(rp.stored_count() == 1);
  auto two = f.a.prepare_list(strided_dlist(
      dram, {{src.addr(), blk, 0, 2 * blk, n / 2}, {src.addr(blk), blk, 0, 2 * blk, n / 2}}));
  CHECK(two.size() == n);
  CHECK(two.stored_count() == 2);

  const auto all = iota_idx(n);
  auto req = f.a.make_request(xfer_op::write, lp, all, rp, all);
  CHECK(req.descriptor_count() == 1);  // dense on both sides: one descriptor
  CHECK(run(req) == status::success);
  CHECK(dst.bytes == src.bytes);
  auto unmerged = f.a.make_request(xfer_op::write, lp, all, rp, all, {.skip_merge = true});
  CHECK(unmerged.descriptor_count() == n);
  // Interleaved runs (even blocks, then odd ones) against the dense remote list: block f of
  // `two` is src block 2f (f < n/2) or 2(f - n/2) + 1.
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  auto req2 = f.a.make_request(xfer_op::write, two, all, rp, all);
  CHECK(run(req2) == status::success);
  bool same = true;
  for (std::size_t f2 = 0; f2 < n && same; ++f2) {
    const std::size_t s = f2 < n / 2 ? 2 * f2 : 2 * (f2 - n / 2) + 1;
    same = std::equal(src.bytes.begin() + static_cast<std::ptrdiff_t>(s * blk),
                      src.bytes.begin() + static_cast<std::ptrdiff_t>((s + 1) * blk),
                      dst.bytes.begin() + static_cast<std::ptrdiff_t>(f2 * blk));
  }
  CHECK(same);
}

TEST_CASE("strided and expanded prepared lists pair in one request, both ways; typed path") {
  pair_fixture f;
  buffer src(16384), dst(16384);
  src.iota(9);
  f.connect(src, dst);
  const auto dram = nixl::mem_kind::dram;
  // local strided, remote expanded: 8 blocks of 128 at stride 512 -> dense at the target
  auto ls = f.a.prepare_list(strided_dlist(dram, {{src.addr(), 128, 0, 512, 8}}));
  nixl::xfer_dlist dense(dram);
  for (std::size_t i = 0; i < 8; ++i) dense.push_back({dst.addr(i * 128), 128, 0});
  auto re = f.a.prepare_list("target", dense);
  const auto idx = iota_idx(8);
  auto r1 = f.a.make_request(xfer_op::write, ls, idx, re, idx);
  CHECK(run(r1) == status::success);
  for (std::size_t i = 0; i < 8; ++i)
    CHECK(std::memcmp(dst.bytes.data() + i * 128, src.bytes.data() + i * 512, 128) == 0);

  // local expanded, remote strided: read it back into another place
  nixl::xfer_dlist back(dram);
  for (std::size_t i = 0; i < 8; ++i) back.push_back({src.addr(8192 + i * 128), 128, 0});
  auto le = f.a.prepare_list(back);
  auto rs = f.a.prepare_list("target", strided_dlist(dram, {{dst.addr(), 128, 0, 128, 8}}));
  auto r2 = f.a.make_request(xfer_op::read, le, idx, rs, idx);
  CHECK(r2.descriptor_count() == 1);  // contiguous on both sides
  CHECK(run(r2) == status::success);
  CHECK(std::memcmp(src.bytes.data() + 8192, dst.bytes.data(), 1024) == 0);

  // The typed API: strided_list<dram_t> gives a typed_prepared, and a typed request.
  auto tl = f.a.prepare_list("", nixl::strided_list<nixl::dram_t>{{src.addr(), 64, 0, 256, 4}});
  auto tr =
      f.a.prepare_list("target", nixl::strided_list<nixl::dram_t>{{dst.addr(4096), 64, 0, 64, 4}});
  auto r3 = f.a.make_request(xfer_op::write, tl, std::vector<int>{3, 2, 1, 0}, tr, iota_idx(4));
  CHECK(run(r3) == status::success);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(std::memcmp(dst.bytes.data() + 4096 + i * 64, src.bytes.data() + (3 - i) * 256, 64) == 0);
}
