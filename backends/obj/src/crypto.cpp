// SHA-256, HMAC-SHA256, hex and base64 over OpenSSL's one-shot calls.

#include <nixl/backends/obj/detail/crypto.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nixl/detail/hex.hpp>
#include <nixl/status.hpp>

namespace nixl::obj::detail {

digest sha256(std::span<const std::byte> data) {
  digest d{};
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), d.data(), &n, EVP_sha256(), nullptr) != 1 ||
      n != d.size())
    raise(status::backend, "EVP_Digest(sha256) failed on {} bytes", data.size());
  return d;
}

digest sha256(std::string_view data) {
  return sha256(std::as_bytes(std::span<const char>(data.data(), data.size())));
}

digest hmac_sha256(std::span<const unsigned char> key, std::string_view data) {
  digest d{};
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.data(),
           &n) == nullptr ||
      n != d.size())
    raise(status::backend, "HMAC(sha256) failed");
  return d;
}

std::string hex(std::span<const unsigned char> bytes) {
  return nixl::detail::to_hex({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
}

std::string base64(std::span<const unsigned char> bytes) {
  std::string s(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(s.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  s.resize(static_cast<std::size_t>(n));
  return s;
}

std::string unbase64(std::string_view text, std::string_view what) {
  if (text.size() % 4 != 0 || text.size() > (1u << 20))
    raise(status::invalid_param, "{}: not base64 (length {}); give the key as base64 text", what,
          text.size());
  std::string s(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(s.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) raise(status::invalid_param, "{}: not base64; give the key as base64 text", what);
  std::size_t len = static_cast<std::size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '=' && len > 0; --i) --len;
  s.resize(len);
  return s;
}

std::string uri_encode(std::string_view s, bool keep_slash) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

}  // namespace nixl::obj::detail
