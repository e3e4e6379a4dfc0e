#pragma once
/// Notifications between CUDA backends of one host: a Unix datagram socket per backend, bound
/// to a name in Linux's abstract namespace (nothing in the file system to clean up; the name
/// disappears with the process). Internal.
///
/// Datagram layout (little-endian, nixl::detail::codec): u32 magic "NXCN", u8 version (1),
/// u8 kind (0: a notification, 1: an abort notice), u16 sender length, u32 message length,
/// sender agent name, message. Lengths are checked against the datagram size; anything else
/// (another kind included) is dropped.

#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/detail/notif_inbox.hpp>
#include <nixl/detail/unique_fd.hpp>
#include <nixl/memory.hpp>

namespace nixl::cuda::detail {

inline constexpr std::uint32_t notif_magic = 0x4e43584e;  // "NXCN"
inline constexpr std::uint8_t notif_version = 1;
inline constexpr std::size_t notif_header = 12;
inline constexpr std::size_t notif_kind_at = 5;  ///< offset of the kind byte
inline constexpr char notif_kind_abort = 1;
inline constexpr std::size_t max_agent_name = 1024;
/// Largest message a notification carries.
inline constexpr std::size_t max_notif_message = 60 * 1024;

/// Address of a peer's socket.
struct socket_address {
  sockaddr_un addr{};
  socklen_t len = 0;
};

/// Writes the header and `sender` into `out` (replaced), with a message length of 0. Throws
/// `nixl::error(invalid_param)` for a sender name above `max_agent_name`.
void start_datagram(std::string& out, std::string_view sender);
/// Sets the message length in a header written by `start_datagram`. Allocates nothing.
void set_message_length(std::string& head, std::size_t n) noexcept;
/// Replaces what follows the first `prefix` bytes (header and sender) of `out` with `msg` and
/// sets the length. Allocates only when `out` lacks the capacity (throws std::bad_alloc then).
inline void finish_datagram(std::string& out, std::size_t prefix, std::string_view msg) {
  out.resize(prefix);
  out.append(msg);
  set_message_length(out, msg.size());
}

/// Parses one datagram; false when it is malformed. `abort`: an abort notice.
bool parse_datagram(std::span<const char> d, std::string_view& sender, std::string_view& msg,
                    bool& abort) noexcept;

class notif_socket {
 public:
  /// Binds a fresh abstract name. Throws nixl::error.
  notif_socket();
  notif_socket(const notif_socket&) = delete;
  notif_socket& operator=(const notif_socket&) = delete;

  /// The abstract name without its leading NUL.
  std::string_view name() const noexcept { return name_; }
  /// Address of an abstract name.
  static socket_address address_of(std::string_view name) noexcept;

  /// Sends `head` and `body` as one datagram without blocking or allocating: 0, EAGAIN when
  /// the peer's queue is full, or an errno (ECONNREFUSED when the peer is gone).
  int send(const socket_address& to, std::string_view head,
           std::string_view body = {}) const noexcept {
    iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                    {const_cast<char*>(body.data()), body.size()}};
    msghdr m{};
    m.msg_name = const_cast<sockaddr_un*>(&to.addr);
    m.msg_namelen = to.len;
    m.msg_iov = iov;
    m.msg_iovlen = body.empty() ? 1 : 2;
    for (;;) {
      if (::sendmsg(fd_.get(), &m, MSG_NOSIGNAL) >= 0) return 0;
      if (errno == EINTR) continue;
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
  }
  /// Moves every queued datagram into `inbox`, by kind.
  void drain(nixl::detail::notif_inbox& inbox);

 private:
  std::mutex drain_mu_;  // buf_
  nixl::detail::unique_fd fd_;
  std::string name_;
  std::vector<char> buf_;
};

}  // namespace nixl::cuda::detail
