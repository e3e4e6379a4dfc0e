#include <nixl/metadata/frame.hpp>

#include <cstring>
#include <limits>

#include <fmt/format.h>

#include <nixl/detail/enum_names.hpp>

namespace nixl::metadata {
namespace {

constexpr char magic0 = 'N';
constexpr char magic1 = 'X';

void put_u32(std::string& out, std::uint32_t v) {
  char b[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff),
               static_cast<char>((v >> 16) & 0xff), static_cast<char>((v >> 24) & 0xff)};
  out.append(b, 4);
}

std::uint32_t get_u32(const char* p) noexcept {
  auto u = [p](int i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])); };
  return u(0) | (u(1) << 8) | (u(2) << 16) | (u(3) << 24);
}

bool known_type(std::uint8_t t) noexcept {
  return t >= static_cast<std::uint8_t>(frame_type::load) &&
         t <= static_cast<std::uint8_t>(frame_type::auth);
}

}  // namespace

std::string_view to_string(frame_type t) noexcept {
  static constexpr auto names = nixl::detail::make_enum_names<frame_type>(
      {"LOAD", "FETCH", "INVALIDATE", "ACK", "ERROR", "AUTH"}, "?", 1);
  return names(t);
}

void append_frame(std::string& out, frame_type type, std::string_view payload) {
  if (payload.size() > std::numeric_limits<std::uint32_t>::max()) {
    nixl::raise(status::invalid_param,
                "metadata frame: payload of {} bytes exceeds the 4 GiB frame limit; send partial "
                "metadata in several pieces",
                payload.size());
  }
  out.reserve(out.size() + frame_header_size + payload.size());
  out.push_back(magic0);
  out.push_back(magic1);
  out.push_back(static_cast<char>(frame_version));
  out.push_back(static_cast<char>(type));
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
}

std::string encode_error(nixl::status code, std::string_view message) {
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(code)));
  out.append(message);
  return out;
}

std::pair<nixl::status, std::string> decode_error(std::string_view payload) {
  if (payload.size() < 4) return {status::unknown, std::string(payload)};
  auto code = static_cast<std::int32_t>(get_u32(payload.data()));
  // Only values that name a status are kept; anything else from the wire is "unknown".
  if (code >= 0 || code < static_cast<std::int32_t>(last_error)) {
    code = static_cast<std::int32_t>(status::unknown);
  }
  return {static_cast<status>(code), std::string(payload.substr(4))};
}

void frame_decoder::append(std::span<const std::byte> bytes) {
  if (failed()) return;
  // Drop what was consumed before growing, so the buffer stays near one frame in size.
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ > buf_.size() / 2)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

frame_decoder::result frame_decoder::fail(std::string msg) {
  error_ = std::move(msg);
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  return result::error;
}

std::size_t frame_decoder::missing() const noexcept {
  std::size_t have = buf_.size() - pos_;
  if (have < frame_header_size) return 0;
  std::size_t len = get_u32(buf_.data() + pos_ + 4);
  return frame_header_size + len > have ? frame_header_size + len - have : 0;
}

frame_decoder::result frame_decoder::next(frame& out) {
  if (failed()) return result::error;
  const std::size_t have = buf_.size() - pos_;
  const char* h = buf_.data() + pos_;
  // Check each header byte as soon as it is there, so garbage is refused early.
  if (have >= 1 && h[0] != magic0) {
    return fail(fmt::format("bad magic byte 0x{:02x}", static_cast<unsigned char>(h[0])));
  }
  if (have >= 2 && h[1] != magic1) {
    return fail(fmt::format("bad magic byte 0x{:02x}", static_cast<unsigned char>(h[1])));
  }
  if (have >= 3 && static_cast<std::uint8_t>(h[2]) != frame_version) {
    return fail(fmt::format("unsupported protocol version {} (this side speaks {})",
                            static_cast<unsigned>(static_cast<std::uint8_t>(h[2])),
                            static_cast<unsigned>(frame_version)));
  }
  if (have >= 4 && !known_type(static_cast<std::uint8_t>(h[3]))) {
    return fail(fmt::format("unknown frame type {}",
                            static_cast<unsigned>(static_cast<std::uint8_t>(h[3]))));
  }
  if (have < frame_header_size) return result::need_more;
  const std::size_t len = get_u32(h + 4);
  if (len > max_) {
    return fail(fmt::format("frame of {} bytes exceeds the limit of {} bytes", len, max_));
  }
  if (have - frame_header_size < len) return result::need_more;
  out.type = static_cast<frame_type>(static_cast<std::uint8_t>(h[3]));
  out.payload.assign(h + frame_header_size, len);
  pos_ += frame_header_size + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return result::frame;
}

}  // namespace nixl::metadata
