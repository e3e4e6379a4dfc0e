#include <nixl/metadata.hpp>

#include <random>

#include "nixl_test/catch.hpp"

namespace {
nixl::agent_metadata sample() {
  nixl::agent_metadata md;
  md.agent = "prefill-0";
  md.connections = {{"UCX", std::string("addr\0bytes", 10)}, {"MEMCPY", "id#1"}};
  md.sections = {
      {"UCX", nixl::mem_kind::dram, {{{0x1000, 4096, 0}, "rkey-1"}, {{0x9000, 64, 0}, ""}}},
      {"UCX", nixl::mem_kind::vram, {{{0x7000, 1 << 20, 3}, std::string(300, 'k')}}}};
  return md;
}
}  // namespace

TEST_CASE("agent metadata round-trips") {
  auto md = sample();
  auto bytes = nixl::encode(md);
  CHECK(bytes.substr(0, 4) == "NXMD");
  CHECK(nixl::decode_metadata(bytes) == md);
  md.partial = true;
  md.sections.clear();
  CHECK(nixl::decode_metadata(nixl::encode(md)) == md);
}

TEST_CASE("descriptor lists round-trip") {
  nixl::xfer_dlist x(nixl::mem_kind::vram, {{1, 2, 3}, {4, 5, 6}});
  CHECK(nixl::decode_xfer_list(nixl::encode(x)) == x);
  nixl::reg_dlist r(nixl::mem_kind::file, {{{0, 0, 9}, "/data/a"}, {{8, 16, 9}, ""}});
  CHECK(nixl::decode_reg_list(nixl::encode(r)) == r);
  // a list blob is not metadata and vice versa
  CHECK_THROWS_AS(nixl::decode_metadata(nixl::encode(x)), nixl::error);
  CHECK_THROWS_AS(nixl::decode_xfer_list(nixl::encode(r)), nixl::error);
}

TEST_CASE("every truncation of a blob is refused with mismatch") {
  const auto bytes = nixl::encode(sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    try {
      (void)nixl::decode_metadata(std::string_view(bytes).substr(0, n));
      FAIL("truncated blob of " << n << " bytes was accepted");
    } catch (const nixl::error& e) {
      REQUIRE(e.status_code() == nixl::status::mismatch);
    }
  }
}

TEST_CASE("corrupted blobs never crash and never allocate unboundedly") {
  const auto good = nixl::encode(sample());
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    try {
      auto md = nixl::decode_metadata(b);
      ++accepted;  // a flip inside a payload byte can still be valid
      REQUIRE(md.agent.size() <= nixl::limits::agent_name);
    } catch (const nixl::error& e) {
      REQUIRE(e.status_code() == nixl::status::mismatch);
    }
  }
  CHECK(accepted < 20000);
}

TEST_CASE("specific defects give clear messages") {
  auto bytes = nixl::encode(sample());
  auto expect = [](std::string b, const char* needle) {
    try {
      (void)nixl::decode_metadata(b);
      FAIL("accepted");
    } catch (const nixl::error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  expect(bad_magic, "bad magic");
  std::string bad_version = bytes;
  bad_version[4] = 9;
  expect(bad_version, "wire version 9");
  expect(bytes + "x", "trailing");
  std::string bad_flags = bytes;
  bad_flags[7] = static_cast<char>(0x80);  // only bit 0 (partial) is defined
  expect(bad_flags, "unknown flags");
  // a huge count with no bytes behind it
  nixl::detail::writer w;
  w.raw("NXMD");
  w.u16(1);
  w.u8(1);
  w.u8(0);
  w.bytes("a");
  w.u32(60);  // connections claimed, none present
  expect(w.take(), "does not fit");
  nixl::detail::writer w2;
  w2.raw("NXMD");
  w2.u16(1);
  w2.u8(2);
  w2.u8(0);
  w2.u8(17);  // bad kind
  w2.u32(0);
  try {
    (void)nixl::decode_xfer_list(w2.take());
    FAIL("accepted");
  } catch (const nixl::error& e) {
    CHECK(std::string(e.what()).find("unknown memory kind 17") != std::string::npos);
  }
}
