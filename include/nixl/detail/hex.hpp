#pragma once
/// Lower-case hexadecimal text of bytes.

#include <string>
#include <string_view>

namespace nixl::detail {

/// Two lower-case hex digits for each byte of `bytes`, in order.
inline std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

}  // namespace nixl::detail
