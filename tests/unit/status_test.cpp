#include <nixl/status.hpp>

#include "nixl_test/catch.hpp"

TEST_CASE("status values are NIXL's codes") {
  using nixl::status;
  STATIC_REQUIRE(static_cast<int>(status::in_progress) == 1);
  STATIC_REQUIRE(static_cast<int>(status::success) == 0);
  STATIC_REQUIRE(static_cast<int>(status::not_posted) == -1);
  STATIC_REQUIRE(static_cast<int>(status::invalid_param) == -2);
  STATIC_REQUIRE(static_cast<int>(status::backend) == -3);
  STATIC_REQUIRE(static_cast<int>(status::not_found) == -4);
  STATIC_REQUIRE(static_cast<int>(status::mismatch) == -5);
  STATIC_REQUIRE(static_cast<int>(status::not_allowed) == -6);
  STATIC_REQUIRE(static_cast<int>(status::repost_active) == -7);
  STATIC_REQUIRE(static_cast<int>(status::unknown) == -8);
  STATIC_REQUIRE(static_cast<int>(status::not_supported) == -9);
  STATIC_REQUIRE(static_cast<int>(status::remote_disconnect) == -10);
  STATIC_REQUIRE(static_cast<int>(status::canceled) == -11);
  STATIC_REQUIRE(static_cast<int>(status::no_telemetry) == -12);
  CHECK(nixl::to_string(status::not_found) == "NIXL_ERR_NOT_FOUND");
  CHECK(nixl::to_string(status::in_progress) == "NIXL_IN_PROG");
  CHECK(nixl::ok(status::in_progress));
  CHECK_FALSE(nixl::ok(status::backend));
}

TEST_CASE("nixl::error is a system_error in the nixl category") {
  try {
    nixl::raise(nixl::status::not_allowed, "call: value {} is bad; fix it", 42);
    FAIL("no throw");
  } catch (const std::system_error& e) {
    CHECK(e.code().category().name() == std::string("nixl"));
    CHECK(e.code().value() == -6);
    CHECK(e.code() == nixl::status::not_allowed);
    CHECK(std::string(e.what()).find("value 42 is bad") != std::string::npos);
    CHECK(dynamic_cast<const nixl::error&>(e).status_code() == nixl::status::not_allowed);
  }
}
