#pragma once
/// FNV-1a, 64 bits: the checksum of the backends' wire blobs (it catches corrupted or truncated
/// input before a transport library parses it) and a stable hash of short names. Not
/// cryptographic: authenticity is the metadata layer's shared secret.

#include <cstdint>
#include <string_view>

namespace nixl::detail {

constexpr std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 14695981039346656037ull;  // the offset basis
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace nixl::detail
