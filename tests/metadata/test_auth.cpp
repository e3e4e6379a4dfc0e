// Authenticated frames (metadata_secret): round trip, another secret, a changed byte, a replay,
// a stale timestamp, a reply bound to its request.
#include <nixl/metadata/auth.hpp>

#include <optional>
#include <string>
#include <thread>

#include "nixl_test/catch.hpp"

using nixl::metadata::auth_nonce;
using nixl::metadata::authenticator;
using nixl::metadata::frame;
using nixl::metadata::frame_decoder;
using nixl::metadata::frame_type;

namespace {

// The payload of the one frame in `wire`.
std::string payload_of(const std::string& wire) {
  frame_decoder d;
  d.append(wire);
  frame f;
  REQUIRE(d.next(f) == frame_decoder::result::frame);
  REQUIRE(f.type == frame_type::auth);
  return f.payload;
}

std::string error_of(authenticator& a, const std::string& payload,
                     const std::optional<auth_nonce>& answers = std::nullopt) {
  try {
    a.open(payload, answers);
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == nixl::status::not_allowed);
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("authenticated frames", "[metadata][auth]") {
  authenticator sender("secret"), listener("secret"), other("another");
  auth_nonce n{};
  const std::string req = payload_of(sender.seal(frame_type::load, "blob", std::nullopt, &n));

  SECTION("a request opens once; the same bytes again are a replay") {
    auto f = listener.open(req, std::nullopt);
    CHECK(f.type == frame_type::load);
    CHECK(f.payload == "blob");
    CHECK(f.nonce == n);
    CHECK(error_of(listener, req).find("replayed") != std::string::npos);
  }
  SECTION("another secret does not verify") {
    CHECK(error_of(other, req).find("HMAC does not verify") != std::string::npos);
  }
  SECTION("any changed byte does not verify") {
    for (std::size_t i :
         {std::size_t{0}, std::size_t{5}, std::size_t{20}, std::size_t{50}, req.size() - 1}) {
      std::string bad = req;
      bad[i] = static_cast<char>(bad[i] ^ 0x40);
      CHECK_FALSE(error_of(listener, bad).empty());
    }
    CHECK(error_of(listener, req.substr(0, 30)).find("shorter") != std::string::npos);
  }
  SECTION("a stale timestamp is refused") {
    authenticator strict("secret", std::chrono::milliseconds(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(error_of(strict, req).find("timestamp") != std::string::npos);
  }
  SECTION("a reply is bound to its request") {
    auto got = listener.open(req, std::nullopt);
    const std::string rep = payload_of(listener.seal(frame_type::ack, "", got.nonce));
    CHECK(sender.open(rep, n).type == frame_type::ack);
    auth_nonce other_req = n;
    other_req[0] ^= 1;
    CHECK(error_of(sender, rep, other_req).find("does not answer") != std::string::npos);
    // a reply cannot pass as a request, nor a request as a reply
    CHECK(error_of(listener, rep).find("reply was sent as a request") != std::string::npos);
    CHECK_FALSE(error_of(sender, req, n).empty());
  }
  SECTION("an empty secret is refused") {
    CHECK_THROWS_AS(authenticator(""), nixl::error);
  }
}
