// The errors of checked libcurl calls (check.hpp).

#include <nixl/backends/obj/check.hpp>

#include <curl/curl.h>

#include <string_view>

#include <fmt/format.h>
#include <nixl/detail/call_site.hpp>
#include <nixl/log.hpp>

namespace nixl::obj::detail {
namespace {

std::string describe(int code, const char* call, const char* file, int line) {
  return nixl::detail::call_failure(
      call, fmt::format("{} ({})", curl_multi_strerror(static_cast<CURLMcode>(code)), code), file,
      line);
}

}  // namespace

void throw_curlm(int code, const char* call, const char* file, int line) {
  throw nixl::error(status::backend, describe(code, call, file, line));
}

void report_curlm(int code, const char* call, const char* file, int line) noexcept {
  try {
    log::error("OBJ: {}", describe(code, call, file, line));
  } catch (...) {
  }
}

}  // namespace nixl::obj::detail
