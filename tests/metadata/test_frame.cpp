#include <nixl/metadata/frame.hpp>

#include <random>

#include "nixl_test/catch.hpp"

using nixl::metadata::frame;
using nixl::metadata::frame_decoder;
using nixl::metadata::frame_type;
using result = frame_decoder::result;

TEST_CASE("frames round-trip, whole or byte by byte", "[metadata][frame]") {
  std::string stream = nixl::metadata::encode_frame(frame_type::load, "blob-1") +
                       nixl::metadata::encode_frame(frame_type::ack, "") +
                       nixl::metadata::encode_frame(frame_type::fetch, std::string(100000, 'x'));
  auto check = [](frame_decoder& d) {
    frame f;
    REQUIRE(d.next(f) == result::frame);
    CHECK(f.type == frame_type::load);
    CHECK(f.payload == "blob-1");
    REQUIRE(d.next(f) == result::frame);
    CHECK(f.type == frame_type::ack);
    CHECK(f.payload.empty());
    REQUIRE(d.next(f) == result::frame);
    CHECK(f.type == frame_type::fetch);
    CHECK(f.payload.size() == 100000);
    CHECK(d.next(f) == result::need_more);
    CHECK_FALSE(d.mid_frame());
  };
  SECTION("whole") {
    frame_decoder d;
    d.append(stream);
    check(d);
  }
  SECTION("byte by byte") {
    frame_decoder d;
    std::vector<frame> got;
    for (char c : stream) {
      d.append(std::string_view(&c, 1));
      frame f;
      while (d.next(f) == result::frame) got.push_back(f);
      REQUIRE_FALSE(d.failed());
    }
    REQUIRE(got.size() == 3);
    CHECK(got[0].payload == "blob-1");
    CHECK(got[2].payload.size() == 100000);
  }
}

TEST_CASE("the header is little-endian with magic and version", "[metadata][frame]") {
  auto f = nixl::metadata::encode_frame(frame_type::invalidate, std::string(0x010203, 'a'));
  REQUIRE(f.size() == 8 + 0x010203);
  CHECK(f[0] == 'N');
  CHECK(f[1] == 'X');
  CHECK(f[2] == 1);
  CHECK(f[3] == 3);
  CHECK(static_cast<unsigned char>(f[4]) == 0x03);
  CHECK(static_cast<unsigned char>(f[5]) == 0x02);
  CHECK(static_cast<unsigned char>(f[6]) == 0x01);
  CHECK(static_cast<unsigned char>(f[7]) == 0x00);
}

TEST_CASE("malformed input fails the decoder early and for good", "[metadata][frame]") {
  frame f;
  SECTION("bad magic on the first byte") {
    frame_decoder d;
    d.append(std::string_view("G"));
    CHECK(d.next(f) == result::error);
    CHECK(std::string(d.error_message()).find("magic") != std::string::npos);
    d.append(nixl::metadata::encode_frame(frame_type::ack, ""));
    CHECK(d.next(f) == result::error);  // stays failed
  }
  SECTION("unsupported version") {
    frame_decoder d;
    d.append(std::string_view("NX\x07", 3));
    CHECK(d.next(f) == result::error);
    CHECK(std::string(d.error_message()).find("version 7") != std::string::npos);
  }
  SECTION("unknown type") {
    frame_decoder d;
    d.append(std::string_view("NX\x01\x09", 4));
    CHECK(d.next(f) == result::error);
    d = frame_decoder();
    d.append(std::string_view("NX\x01\x00", 4));
    CHECK(d.next(f) == result::error);
  }
  SECTION("oversized length is refused from the header alone") {
    frame_decoder d(1024);
    d.append(std::string_view("NX\x01\x01\x01\x04\x00\x00", 8));  // 1025 bytes
    CHECK(d.next(f) == result::error);
    CHECK(std::string(d.error_message()).find("1025") != std::string::npos);
    CHECK(d.buffered() == 0);
  }
  SECTION("a truncated frame is mid-frame, not an error") {
    frame_decoder d;
    auto whole = nixl::metadata::encode_frame(frame_type::load, "0123456789");
    d.append(std::string_view(whole).substr(0, 12));
    CHECK(d.next(f) == result::need_more);
    CHECK(d.mid_frame());
    CHECK(d.missing() == 6);
  }
}

TEST_CASE("error payloads carry a status", "[metadata][frame]") {
  auto p = nixl::metadata::encode_error(nixl::status::not_allowed, "no");
  auto [s, m] = nixl::metadata::decode_error(p);
  CHECK(s == nixl::status::not_allowed);
  CHECK(m == "no");
  CHECK(nixl::metadata::decode_error("ab").first == nixl::status::unknown);
  // Non-error values from the wire are not trusted as errors.
  CHECK(nixl::metadata::decode_error(std::string("\x00\x00\x00\x00", 4)).first ==
        nixl::status::unknown);
  CHECK(nixl::metadata::decode_error(std::string("\x00\x00\x00\x80", 4)).first ==
        nixl::status::unknown);
}

TEST_CASE("random bytes never crash the decoder", "[metadata][frame]") {
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    frame_decoder d(4096);
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    if (i % 2 == 0 && s.size() >= 4) {  // make half of them look like a header
      s[0] = 'N';
      s[1] = 'X';
      s[2] = 1;
      s[3] = static_cast<char>(1 + rng() % 5);
    }
    d.append(s);
    frame f;
    int frames = 0;
    while (d.next(f) == result::frame) ++frames;
    CHECK(frames <= static_cast<int>(s.size() / 8));
  }
}
