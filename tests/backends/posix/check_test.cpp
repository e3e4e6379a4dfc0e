// NIXL_POSIX_CHECK / NIXL_POSIX_WARN: the checked-call pair of the POSIX backend, for both
// conventions of the libraries it calls (libc's -1 and errno, liburing's and libaio's -errno).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <nixl/backends/posix.hpp>
#include <nixl/backends/posix/check.hpp>

#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"

using nixl::test::what_of;

namespace {

/// liburing's and libaio's convention: -errno returned, errno untouched.
int returns_negated(int err) {
  return -err;
}

}  // namespace

TEST_CASE("posix check: a libc failure names the call, errno, file and line", "[posix]") {
  const auto msg = what_of([] { (void)NIXL_POSIX_CHECK(::open("/nonexistent/nixl", O_RDONLY)); });
  CHECK(msg.find("::open(\"/nonexistent/nixl\", O_RDONLY)") != std::string::npos);
  CHECK(msg.find("No such file or directory (errno 2)") != std::string::npos);
  CHECK(msg.find("check_test.cpp:") != std::string::npos);
}

TEST_CASE("posix check: -errno results, the status and the hint", "[posix]") {
  try {
    (void)NIXL_POSIX_CHECK_HINT(returns_negated(EAGAIN), nixl::status::invalid_param,
                                std::string("the fix"));
    FAIL("no throw");
  } catch (const nixl::error& e) {
    CHECK(e.status_code() == nixl::status::invalid_param);
    const std::string msg = e.what();
    CHECK(msg.find("returns_negated(EAGAIN): Resource temporarily unavailable (errno 11)") !=
          std::string::npos);
    CHECK(msg.find("; the fix") != std::string::npos);
  }
  // -1 without errno set is -EPERM in the second convention.
  CHECK(what_of([] { (void)NIXL_POSIX_CHECK(returns_negated(EPERM)); }).find("(errno 1)") !=
        std::string::npos);
}

TEST_CASE("posix check: success yields the result; WARN never throws", "[posix]") {
  const int fd = NIXL_POSIX_CHECK(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  CHECK(fd >= 0);
  CHECK(NIXL_POSIX_WARN(::close(fd)));
  CHECK_FALSE(NIXL_POSIX_WARN(::close(fd)));  // closed already: EBADF, logged
}

TEST_CASE("posix check: config is nixl::posix::config, also reachable as backend::config",
          "[posix]") {
  STATIC_REQUIRE(std::is_same_v<nixl::posix::backend::config, nixl::posix::config>);
  const auto c = nixl::posix::config::from_params({{"use_posix", "true"}});
  CHECK(c.preferred == nixl::posix::detail::engine_kind::posix);
}
