// Unix datagram notifications (see notify.hpp for the layout).

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include <nixl/backends/cuda/notify.hpp>
#include <nixl/backends/cuda/runtime.hpp>
#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::cuda::detail {

namespace {
void put32(char* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put16(char* p, std::uint16_t v) noexcept {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>(v >> 8);
}
std::uint32_t get32(const char* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
std::uint16_t get16(const char* p) noexcept {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(p[0]) |
                                    (static_cast<unsigned char>(p[1]) << 8));
}
}  // namespace

void start_datagram(std::string& out, std::string_view sender) {
  if (sender.size() > max_agent_name)
    raise(status::invalid_param, "CUDA notification: agent name of {} bytes exceeds {}",
          sender.size(), max_agent_name);
  out.assign(notif_header, '\0');
  put32(out.data(), notif_magic);
  out[4] = 1;
  put16(out.data() + 6, static_cast<std::uint16_t>(sender.size()));
  out.append(sender);
}

void finish_datagram(std::string& out, std::size_t prefix, std::string_view msg) noexcept {
  out.resize(prefix);
  out.append(msg);
  put32(out.data() + 8, static_cast<std::uint32_t>(msg.size()));
}

bool parse_datagram(std::span<const char> d, std::string_view& sender,
                    std::string_view& msg) noexcept {
  if (d.size() < notif_header) return false;
  if (get32(d.data()) != notif_magic || d[4] != 1) return false;
  const std::size_t ns = get16(d.data() + 6);
  const std::size_t ms = get32(d.data() + 8);
  if (ns > max_agent_name || ms > max_notif_message) return false;
  if (d.size() != notif_header + ns + ms) return false;
  sender = {d.data() + notif_header, ns};
  msg = {d.data() + notif_header + ns, ms};
  return true;
}

socket_address notif_socket::address_of(std::string_view name) noexcept {
  socket_address a;
  a.addr.sun_family = AF_UNIX;
  const std::size_t n = std::min(name.size(), sizeof(a.addr.sun_path) - 1);
  a.addr.sun_path[0] = '\0';
  std::memcpy(a.addr.sun_path + 1, name.data(), n);
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

notif_socket::notif_socket() : buf_(notif_header + max_agent_name + max_notif_message + 1) {
  static std::atomic<unsigned> counter{0};
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    raise(status::backend,
          "socket(AF_UNIX, SOCK_DGRAM): {}; the CUDA backend needs Unix sockets "
          "for notifications",
          std::strerror(errno));
  const int big = 4 << 20;
  (void)::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  (void)::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  name_ = fmt::format("nixl-cuda-{}-{:016x}-{}", ::getpid(), self().process_token, counter++);
  const socket_address a = address_of(name_);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a.addr), a.len) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    raise(status::backend, "bind(AF_UNIX abstract \"{}\"): {}", name_, std::strerror(e));
  }
}

notif_socket::~notif_socket() {
  if (fd_ >= 0) ::close(fd_);
}

int notif_socket::send(const socket_address& to, std::span<const char> d) const noexcept {
  for (;;) {
    const ssize_t n = ::sendto(fd_, d.data(), d.size(), MSG_NOSIGNAL,
                               reinterpret_cast<const sockaddr*>(&to.addr), to.len);
    if (n >= 0) return 0;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? EAGAIN : errno;
  }
}

void notif_socket::drain(nixl::notif_map& out) {
  for (;;) {
    const ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        nixl::log::warn("CUDA notifications: recv: {}", std::strerror(errno));
      return;
    }
    if (static_cast<std::size_t>(n) > buf_.size()) {
      nixl::log::warn("CUDA notifications: dropped a datagram of {} bytes (limit {})", n,
                      buf_.size());
      continue;
    }
    std::string_view sender, msg;
    if (!parse_datagram({buf_.data(), static_cast<std::size_t>(n)}, sender, msg)) {
      nixl::log::warn("CUDA notifications: dropped a malformed datagram of {} bytes", n);
      continue;
    }
    out[std::string(sender)].emplace_back(msg);
  }
}

}  // namespace nixl::cuda::detail
