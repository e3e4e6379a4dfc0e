#pragma once
/// The message of a checked C call that failed, one shape for every backend's check macros:
/// "<call>: <what> [<file>:<line>]", then "; <hint>" when there is one. `file` is the caller's
/// `__FILE__`, of which only the file name is kept.

#include <string>
#include <string_view>

namespace nixl::detail {

/// The file name of `path` (what follows its last '/').
constexpr std::string_view file_name(std::string_view path) noexcept {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// "<call>: <what> [<file name>:<line>]" and "; <hint>" when `hint` is not empty.
inline std::string call_failure(std::string_view call, std::string_view what, const char* file,
                                int line, std::string_view hint = {}) {
  std::string s;
  s.reserve(call.size() + what.size() + hint.size() + 48);
  s.append(call).append(": ").append(what).append(" [").append(file_name(file));
  s.append(":").append(std::to_string(line)).append("]");
  if (!hint.empty()) s.append("; ").append(hint);
  return s;
}

}  // namespace nixl::detail
