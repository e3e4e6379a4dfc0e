#pragma once
/// Authenticated frames of the peer-to-peer metadata protocol (optional shared secret).
///
/// With a secret, every request and reply travels inside an AUTH frame (type 6) whose payload is
///
///     offset 0   u8        inner frame type (LOAD, FETCH, INVALIDATE, ACK, ERROR)
///     offset 1   u8        direction: 0 request, 1 reply
///     offset 2   u64 LE    timestamp, milliseconds since the Unix epoch (sender's clock)
///     offset 10  16 bytes  nonce, fresh random bytes of the sender
///     offset 26  16 bytes  the request's nonce (replies), zeros (requests)
///     offset 42  32 bytes  HMAC-SHA256(secret, "NIXL-MD-AUTH1" || bytes 0..41 || inner payload)
///     offset 74  inner payload
///
/// The receiver of a request accepts it only with a valid MAC, a timestamp within `max_skew`
/// of its own clock and a nonce it has not seen within that window (replays are refused). A
/// reply is accepted only with a valid MAC and the nonce of the request it answers. See
/// docs/metadata-format.md.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include <nixl/metadata/frame.hpp>

namespace nixl::metadata {

/// Bytes of the AUTH header before the inner payload.
inline constexpr std::size_t auth_header_size = 74;
inline constexpr std::size_t auth_nonce_size = 16;

using auth_nonce = std::array<unsigned char, auth_nonce_size>;

/// An opened AUTH frame.
struct auth_frame {
  frame_type type{};
  std::string payload;
  auth_nonce nonce{};
};

/// Seals and opens AUTH frames with one shared secret; remembers the nonces of accepted
/// requests for `max_skew` so that a replayed frame is refused.
class authenticator {
 public:
  /// Throws nixl::error(invalid_param) for an empty secret.
  explicit authenticator(std::string secret,
                         std::chrono::milliseconds max_skew = std::chrono::seconds(30));

  /// An AUTH frame (header included) carrying `type` and `payload`. `answers` is the nonce of
  /// the request a reply answers; requests pass nullopt. `nonce_out` receives the fresh nonce.
  std::string seal(frame_type type, std::string_view payload,
                   const std::optional<auth_nonce>& answers, auth_nonce* nonce_out = nullptr) const;

  /// Opens the payload of a received AUTH frame: a request (`answers` empty; checks time and
  /// replay) or the reply to the request whose nonce is `answers`. Throws
  /// nixl::error(not_allowed) naming what failed: a malformed header, a MAC that does not verify
  /// (another secret, or an altered frame), a stale timestamp, a replayed nonce.
  auth_frame open(std::string_view auth_payload, const std::optional<auth_nonce>& answers);

 private:
  std::string mac(std::string_view header, std::string_view payload) const;

  std::string secret_;
  std::chrono::milliseconds skew_;
  // accepted request nonces, with the time they may be forgotten
  std::unordered_set<std::string> seen_;
  std::deque<std::pair<std::int64_t, std::string>> expiry_;
};

}  // namespace nixl::metadata
