#pragma once
/// What the request signers share (sigv4.hpp, shared_key.hpp): headers as sent, lower-cased
/// names and the items of a query string.

#include <cctype>
#include <string>
#include <string_view>
#include <utility>

namespace nixl::obj::detail {

/// A header as sent: name in any case, value untrimmed.
using header = std::pair<std::string, std::string>;

/// `s` with ASCII letters in lower case.
inline std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// Calls `f(name, value)` for each non-empty item of a query string ("a=1&b&c=3"), as sent
/// (still encoded); `value` is empty for an item without '='.
template <class F>
void for_each_query_item(std::string_view query, F&& f) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    f(item.substr(0, eq), eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1));
  }
}

}  // namespace nixl::obj::detail
