#pragma once
/// Hashes, MACs and encodings the request signers need (OpenSSL underneath), as plain functions.

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace nixl::obj::detail {

using digest = std::array<unsigned char, 32>;

/// SHA-256 of `data`.
digest sha256(std::span<const std::byte> data);
digest sha256(std::string_view data);
/// HMAC-SHA256 of `data` under `key`.
digest hmac_sha256(std::span<const unsigned char> key, std::string_view data);
/// Lower-case hex of `bytes`.
std::string hex(std::span<const unsigned char> bytes);
/// Standard base64 (with padding).
std::string base64(std::span<const unsigned char> bytes);
/// Decodes standard base64; throws `nixl::error(invalid_param)` naming `what` on bad input.
std::string unbase64(std::string_view text, std::string_view what);

/// Percent-encodes every byte outside A-Z a-z 0-9 - _ . ~ (and '/' when `keep_slash`), as
/// AWS Signature V4 and Azure want (upper-case hex).
std::string uri_encode(std::string_view s, bool keep_slash);

}  // namespace nixl::obj::detail
