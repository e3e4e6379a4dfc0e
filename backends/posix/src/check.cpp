// The errors of checked C calls (check.hpp): one message shape for every call of the backend.

#include <nixl/backends/posix/check.hpp>

#include <string>
#include <system_error>

#include <fmt/format.h>
#include <nixl/detail/call_site.hpp>
#include <nixl/log.hpp>

namespace nixl::posix::detail {
namespace {

std::string describe(int err, const char* call, const char* file, int line,
                     std::string_view hint = {}) {
  return nixl::detail::call_failure(
      call, fmt::format("{} (errno {})", std::system_category().message(err), err), file, line,
      hint);
}

}  // namespace

void throw_posix(int err, const char* call, const char* file, int line, status s,
                 std::string_view hint) {
  throw nixl::error(s, describe(err, call, file, line, hint));
}

void report_posix(int err, const char* call, const char* file, int line) noexcept {
  try {
    log::error("POSIX: {}", describe(err, call, file, line));
  } catch (...) {
  }
}

}  // namespace nixl::posix::detail
