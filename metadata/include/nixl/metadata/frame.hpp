#pragma once
/// Framing of the peer-to-peer metadata protocol.
///
/// A frame is an 8-byte header followed by a payload:
///
///     offset 0  'N' 'X'      magic
///     offset 2  u8           protocol version (1)
///     offset 3  u8           frame_type
///     offset 4  u32 LE       payload length (at most the receiver's max_frame)
///     offset 8  payload
///
/// Every byte comes from a peer and is untrusted: the decoder checks the header as soon as its
/// eight bytes are present, so an oversized length is refused before any payload is buffered.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nixl/status.hpp>

namespace nixl::metadata {

/// Message types. Each request gets exactly one reply on the same connection.
enum class frame_type : std::uint8_t {
  load = 1,   ///< payload: a metadata blob (full or partial); reply: ack or error
  fetch = 2,  ///< payload: the agent name the sender expects (may be empty); reply: load or error
  invalidate = 3,  ///< payload: the sender's agent name; reply: ack
  ack = 4,         ///< payload: empty
  error = 5,       ///< payload: i32 LE nixl::status, then a message
  auth = 6,        ///< payload: an authenticated frame of the types above (auth.hpp)
};

/// Name of a frame type for messages ("LOAD", "FETCH", ...); "?" for unknown values.
std::string_view to_string(frame_type t) noexcept;

inline constexpr std::size_t frame_header_size = 8;
inline constexpr std::uint8_t frame_version = 1;
/// Default upper bound on a payload: full metadata of a large agent fits many times over.
inline constexpr std::size_t default_max_frame = std::size_t{64} << 20;

/// One decoded frame.
struct frame {
  frame_type type{};
  std::string payload;
};

/// Appends a complete frame to `out`. Throws nixl::error(invalid_param) if the payload does not
/// fit a u32 length.
void append_frame(std::string& out, frame_type type, std::string_view payload);

/// Returns a complete frame.
inline std::string encode_frame(frame_type type, std::string_view payload) {
  std::string out;
  append_frame(out, type, payload);
  return out;
}

/// Payload of an error frame.
std::string encode_error(nixl::status code, std::string_view message);
/// Parses an error payload; a payload too short to hold a status gives status::unknown.
std::pair<nixl::status, std::string> decode_error(std::string_view payload);

/// Incremental decoder of a byte stream into frames. Once it has failed it stays failed: the
/// connection it reads must be closed.
class frame_decoder {
 public:
  enum class result { need_more, frame, error };

  explicit frame_decoder(std::size_t max_frame = default_max_frame) noexcept : max_(max_frame) {}

  /// Appends received bytes.
  void append(std::span<const std::byte> bytes);
  void append(std::string_view bytes) {
    append(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
  }
  /// Extracts the next complete frame into `out` (result::frame), or says that more bytes are
  /// needed, or that the stream is malformed (result::error; see error_message()).
  result next(frame& out);

  /// Why decoding failed; empty while it has not.
  std::string_view error_message() const noexcept { return error_; }
  bool failed() const noexcept { return !error_.empty(); }
  /// True when bytes of an incomplete frame are buffered (the stream ended mid-frame if it closes
  /// now).
  bool mid_frame() const noexcept { return buf_.size() > pos_; }
  /// Bytes buffered and not yet returned as a frame.
  std::size_t buffered() const noexcept { return buf_.size() - pos_; }
  /// Bytes still missing for the frame being received; 0 when unknown (header incomplete).
  std::size_t missing() const noexcept;

 private:
  result fail(std::string msg);

  std::size_t max_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace nixl::metadata
