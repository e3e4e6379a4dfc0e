#include <nixl/metadata/auth.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include <fmt/format.h>
#include <nixl/status.hpp>

namespace nixl::metadata {
namespace {

constexpr std::string_view context = "NIXL-MD-AUTH1";
constexpr std::size_t mac_offset = 42;
constexpr std::size_t mac_size = 32;
// Bound on remembered nonces: a peer cannot make the listener grow without limit; past it,
// requests are refused until old nonces age out.
constexpr std::size_t max_remembered = 1u << 20;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

authenticator::authenticator(std::string secret, std::chrono::milliseconds max_skew)
    : secret_(std::move(secret)), skew_(max_skew) {
  if (secret_.empty())
    nixl::raise(status::invalid_param, "metadata_secret: empty; leave it unset for no secret");
}

std::string authenticator::mac(std::string_view header, std::string_view payload) const {
  std::string data;
  data.reserve(context.size() + header.size() + payload.size());
  data.append(context).append(header).append(payload);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
           &len) == nullptr ||
      len != mac_size)
    nixl::raise(status::backend, "metadata authentication: HMAC-SHA256 failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string authenticator::seal(frame_type type, std::string_view payload,
                                const std::optional<auth_nonce>& answers,
                                auth_nonce* nonce_out) const {
  auth_nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    nixl::raise(status::backend, "metadata authentication: no random bytes for a nonce (OpenSSL)");
  if (nonce_out != nullptr) *nonce_out = n;
  std::string h;
  h.reserve(auth_header_size);
  h.push_back(static_cast<char>(type));
  h.push_back(answers ? 1 : 0);
  put_u64(h, static_cast<std::uint64_t>(now_ms()));
  h.append(reinterpret_cast<const char*>(n.data()), n.size());
  if (answers)
    h.append(reinterpret_cast<const char*>(answers->data()), answers->size());
  else
    h.append(auth_nonce_size, '\0');
  const std::string m = mac(h, payload);
  std::string body = h + m;
  body.append(payload);
  return encode_frame(frame_type::auth, body);
}

auth_frame authenticator::open(std::string_view p, const std::optional<auth_nonce>& answers) {
  if (p.size() < auth_header_size)
    nixl::raise(status::not_allowed, "authenticated frame of {} bytes is shorter than its header",
                p.size());
  const std::string_view header = p.substr(0, mac_offset);
  const std::string_view got = p.substr(mac_offset, mac_size);
  const std::string_view payload = p.substr(auth_header_size);
  const std::string want = mac(header, payload);
  if (CRYPTO_memcmp(want.data(), got.data(), mac_size) != 0)
    nixl::raise(status::not_allowed,
                "authentication failed: the frame's HMAC does not verify (another "
                "metadata_secret, or the frame was altered)");
  auth_frame f;
  const auto inner = static_cast<std::uint8_t>(p[0]);
  if (inner < static_cast<std::uint8_t>(frame_type::load) ||
      inner > static_cast<std::uint8_t>(frame_type::error))
    nixl::raise(status::not_allowed, "authenticated frame carries unknown type {}", inner);
  f.type = static_cast<frame_type>(inner);
  const bool is_reply = p[1] != 0;
  std::memcpy(f.nonce.data(), p.data() + 10, auth_nonce_size);
  if (answers) {
    if (!is_reply || std::memcmp(p.data() + 26, answers->data(), auth_nonce_size) != 0)
      nixl::raise(status::not_allowed,
                  "authentication failed: the reply does not answer this request (replayed)");
    f.payload = std::string(payload);
    return f;
  }
  if (is_reply)
    nixl::raise(status::not_allowed, "authentication failed: a reply was sent as a request");
  const std::int64_t now = now_ms();
  const auto ts = static_cast<std::int64_t>(get_u64(p.data() + 2));
  if (ts < now - skew_.count() || ts > now + skew_.count())
    nixl::raise(status::not_allowed,
                "authentication failed: the frame's timestamp is {} ms away from this host's "
                "clock (at most {} ms allowed: a replayed frame, or clocks out of sync)",
                ts - now, skew_.count());
  while (!expiry_.empty() && expiry_.front().first < now) {
    seen_.erase(expiry_.front().second);
    expiry_.pop_front();
  }
  std::string key(reinterpret_cast<const char*>(f.nonce.data()), f.nonce.size());
  if (seen_.contains(key))
    nixl::raise(status::not_allowed, "authentication failed: replayed frame (nonce seen before)");
  if (seen_.size() >= max_remembered)
    nixl::raise(status::not_allowed,
                "authentication: more than {} requests within {} ms; refusing until older ones "
                "age out",
                max_remembered, skew_.count());
  // remembered until its timestamp leaves the window
  expiry_.emplace_back(ts + skew_.count(), key);
  seen_.insert(std::move(key));
  f.payload = std::string(payload);
  return f;
}

}  // namespace nixl::metadata
