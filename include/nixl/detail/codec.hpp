#pragma once
/// Little-endian byte writer and bounds-checked reader: the one codec for metadata and
/// descriptor lists. Every read is checked; a bad input throws `nixl::error(mismatch)`.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include <nixl/detail/status.hpp>

namespace nixl::detail {

static_assert(std::endian::native == std::endian::little ||
              std::endian::native == std::endian::big);

template <class T>
constexpr T to_le(T v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    return v;
  } else {
    T r{};
    for (std::size_t i = 0; i < sizeof(T); ++i)
      r = static_cast<T>(r << 8) | static_cast<T>((v >> (8 * i)) & 0xff);
    return r;
  }
}

/// Appends little-endian integers and length-prefixed byte strings.
class writer {
 public:
  void u8(std::uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { put(v); }
  void u32(std::uint32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  /// A u32 length, then the bytes.
  void bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    buf_.append(s);
  }
  void raw(std::string_view s) { buf_.append(s); }
  std::string take() noexcept { return std::move(buf_); }
  std::size_t size() const noexcept { return buf_.size(); }
  void reserve(std::size_t n) { buf_.reserve(n); }

 private:
  template <class T>
  void put(T v) {
    v = to_le(v);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    buf_.append(b, sizeof(T));
  }
  std::string buf_;
};

/// Reads what `writer` wrote; every read checks the remaining length.
class reader {
 public:
  reader(std::span<const std::byte> in, std::string_view what) : in_(in), what_(what) {}
  reader(std::string_view in, std::string_view what)
      : reader(std::as_bytes(std::span(in.data(), in.size())), what) {}

  std::uint8_t u8(std::string_view field) { return get<std::uint8_t>(field); }
  std::uint16_t u16(std::string_view field) { return get<std::uint16_t>(field); }
  std::uint32_t u32(std::string_view field) { return get<std::uint32_t>(field); }
  std::uint64_t u64(std::string_view field) { return get<std::uint64_t>(field); }

  /// A u32 length (at most `max`), then that many bytes.
  std::string_view bytes(std::string_view field, std::size_t max) {
    const std::uint32_t n = u32(field);
    if (n > max) fail("{}: {} length {} exceeds the limit of {} bytes", what_, field, n, max);
    return raw(field, n);
  }
  std::string_view raw(std::string_view field, std::size_t n) {
    need(field, n);
    std::string_view s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  /// A count that must fit in the remaining input, with at least `min_each` bytes per item.
  std::uint32_t count(std::string_view field, std::size_t min_each, std::size_t max) {
    const std::uint32_t n = u32(field);
    if (n > max) fail("{}: {} count {} exceeds the limit of {}", what_, field, n, max);
    if (min_each != 0 && n > remaining() / min_each)
      fail("{}: {} count {} does not fit in the {} bytes left", what_, field, n, remaining());
    return n;
  }
  std::size_t remaining() const noexcept { return in_.size() - pos_; }
  std::size_t position() const noexcept { return pos_; }
  /// Throws unless every byte was consumed.
  void finish() const {
    if (pos_ != in_.size()) fail("{}: {} unexpected trailing bytes", what_, in_.size() - pos_);
  }
  template <class... A>
  [[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) const {
    raise(status::mismatch, f, std::forward<A>(a)...);
  }

 private:
  void need(std::string_view field, std::size_t n) const {
    if (n > remaining())
      fail("{}: truncated at byte {} reading {} ({} bytes needed, {} left)", what_, pos_, field, n,
           remaining());
  }
  template <class T>
  T get(std::string_view field) {
    need(field, sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return to_le(v);
  }
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  std::string_view what_;
};

}  // namespace nixl::detail
