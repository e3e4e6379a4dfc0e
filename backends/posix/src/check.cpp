// The errors of checked C calls (check.hpp): one message shape for every call of the backend.

#include <nixl/backends/posix/check.hpp>

#include <iterator>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <nixl/log.hpp>

namespace nixl::posix::detail {
namespace {

std::string_view base_name(const char* file) noexcept {
  std::string_view f(file);
  const auto slash = f.rfind('/');
  return slash == std::string_view::npos ? f : f.substr(slash + 1);
}

std::string describe(int err, const char* call, const char* file, int line) {
  return fmt::format("{}: {} (errno {}) [{}:{}]", call, std::system_category().message(err), err,
                     base_name(file), line);
}

}  // namespace

void throw_posix(int err, const char* call, const char* file, int line, status s,
                 std::string_view hint) {
  std::string msg = describe(err, call, file, line);
  if (!hint.empty()) fmt::format_to(std::back_inserter(msg), "; {}", hint);
  throw nixl::error(s, msg);
}

void report_posix(int err, const char* call, const char* file, int line) noexcept {
  try {
    log::error("POSIX: {}", describe(err, call, file, line));
  } catch (...) {
  }
}

}  // namespace nixl::posix::detail
