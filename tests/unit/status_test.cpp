#include <iterator>

#include <nixl/status.hpp>

#include "nixl_test/catch.hpp"

TEST_CASE("status values are NIXL's codes") {
  using nixl::status;
  STATIC_REQUIRE(static_cast<int>(status::in_progress) == 1);
  STATIC_REQUIRE(static_cast<int>(status::success) == 0);
  // the errors count down from -1 in NIXL's order
  constexpr status errors[] = {
      status::not_posted,    status::invalid_param,     status::backend,       status::not_found,
      status::mismatch,      status::not_allowed,       status::repost_active, status::unknown,
      status::not_supported, status::remote_disconnect, status::canceled,      status::no_telemetry,
      status::xfer_stalled};
  for (int i = 0; i < static_cast<int>(std::size(errors)); ++i) {
    INFO(nixl::to_string(errors[i]));
    CHECK(static_cast<int>(errors[i]) == -1 - i);
  }
  CHECK(nixl::to_string(status::not_found) == "NIXL_ERR_NOT_FOUND");
  CHECK(nixl::to_string(status::in_progress) == "NIXL_IN_PROG");
  CHECK(nixl::to_string(status::xfer_stalled) == "NIXL_ERR_XFER_STALLED");
  CHECK(nixl::last_error == status::xfer_stalled);
  CHECK(nixl::to_string(static_cast<status>(-14)) == "NIXL_ERR_UNKNOWN");
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
