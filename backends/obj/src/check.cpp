// The errors of checked libcurl calls (check.hpp).

#include <nixl/backends/obj/check.hpp>

#include <curl/curl.h>

#include <string_view>

#include <fmt/format.h>
#include <nixl/log.hpp>

namespace nixl::obj::detail {
namespace {

std::string describe(int code, const char* call, const char* file, int line) {
  std::string_view f(file);
  if (auto s = f.rfind('/'); s != std::string_view::npos) f.remove_prefix(s + 1);
  return fmt::format("{}: {} ({}) [{}:{}]", call, curl_multi_strerror(static_cast<CURLMcode>(code)),
                     code, f, line);
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
