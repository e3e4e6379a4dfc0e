#pragma once
/// Notifications between CUDA backends of one host: a Unix datagram socket per backend, bound
/// to a name in Linux's abstract namespace (nothing in the file system to clean up; the name
/// disappears with the process). Internal.
///
/// Datagram layout (little-endian): u32 magic "NXCN", u8 version (1), u8 0, u16 sender length,
/// u32 message length, sender agent name, message. Lengths are checked against the datagram
/// size; anything else is dropped.

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/memory.hpp>

namespace nixl::cuda::detail {

inline constexpr std::uint32_t notif_magic = 0x4e43584e;  // "NXCN"
inline constexpr std::size_t notif_header = 12;
inline constexpr std::size_t max_agent_name = 1024;
/// Largest message a notification carries.
inline constexpr std::size_t max_notif_message = 60 * 1024;

/// Address of a peer's socket.
struct socket_address {
  sockaddr_un addr{};
  socklen_t len = 0;
};

/// Writes the header and `sender` into `out` (resized); the message is appended later with
/// `finish_datagram`.
void start_datagram(std::string& out, std::string_view sender);
/// Appends `msg` after the prefix of length `prefix` and fixes the length field. Allocates
/// nothing when `out` has the capacity.
void finish_datagram(std::string& out, std::size_t prefix, std::string_view msg) noexcept;

/// Parses one datagram; false when it is malformed.
bool parse_datagram(std::span<const char> d, std::string_view& sender,
                    std::string_view& msg) noexcept;

class notif_socket {
 public:
  /// Binds a fresh abstract name. Throws nixl::error.
  notif_socket();
  ~notif_socket();
  notif_socket(const notif_socket&) = delete;
  notif_socket& operator=(const notif_socket&) = delete;

  /// The abstract name without its leading NUL.
  std::string_view name() const noexcept { return name_; }
  /// Address of an abstract name.
  static socket_address address_of(std::string_view name) noexcept;

  /// Sends one datagram without blocking: 0, EAGAIN when the peer's queue is full, or an errno
  /// (ECONNREFUSED when the peer is gone).
  int send(const socket_address& to, std::span<const char> datagram) const noexcept;
  /// Appends every queued notification to `out`.
  void drain(nixl::notif_map& out);

 private:
  int fd_ = -1;
  std::string name_;
  std::vector<char> buf_;
};

}  // namespace nixl::cuda::detail
