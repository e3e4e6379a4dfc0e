// Unix datagram notifications (see notify.hpp for the layout).

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include <nixl/backends/cuda/detail/notify.hpp>
#include <nixl/detail/codec.hpp>
#include <nixl/detail/host_identity.hpp>
#include <nixl/log.hpp>
#include <nixl/status.hpp>

namespace nixl::cuda::detail {

void start_datagram(std::string& out, std::string_view sender) {
  if (sender.size() > max_agent_name)
    raise(status::invalid_param, "CUDA notification: agent name of {} bytes exceeds {}",
          sender.size(), max_agent_name);
  nixl::detail::writer w;
  w.reserve(notif_header + sender.size());
  w.u32(notif_magic);
  w.u8(notif_version);
  w.u8(0);
  w.u16(static_cast<std::uint16_t>(sender.size()));
  w.u32(0);  // message length, set by set_message_length
  w.raw(sender);
  out = w.take();
}

void set_message_length(std::string& head, std::size_t n) noexcept {
  const auto v = nixl::detail::to_le(static_cast<std::uint32_t>(n));
  std::memcpy(head.data() + 8, &v, sizeof(v));
}

bool parse_datagram(std::span<const char> d, std::string_view& sender, std::string_view& msg,
                    bool& abort) noexcept {
  try {
    nixl::detail::reader r(std::string_view(d.data(), d.size()), "CUDA notification");
    if (r.u32("magic") != notif_magic || r.u8("version") != notif_version) return false;
    const std::uint8_t kind = r.u8("kind");
    if (kind > static_cast<std::uint8_t>(notif_kind_abort)) return false;
    abort = kind == static_cast<std::uint8_t>(notif_kind_abort);
    const std::size_t ns = r.u16("sender length");
    const std::size_t ms = r.u32("message length");
    if (ns > max_agent_name || ms > max_notif_message || r.remaining() != ns + ms) return false;
    sender = r.raw("sender", ns);
    msg = r.raw("message", ms);
    return true;
  } catch (...) {  // truncated
    return false;
  }
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
  fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd_)
    raise(status::backend,
          "socket(AF_UNIX, SOCK_DGRAM): {}; the CUDA backend needs Unix sockets "
          "for notifications",
          std::strerror(errno));
  const int big = 4 << 20;
  (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  name_ = fmt::format("nixl-cuda-{}-{:016x}-{}", ::getpid(),
                      nixl::detail::host_identity::self().token, counter++);
  const socket_address a = address_of(name_);
  if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) != 0)
    raise(status::backend, "bind(AF_UNIX abstract \"{}\"): {}", name_, std::strerror(errno));
}

void notif_socket::drain(nixl::detail::notif_inbox& inbox) {
  using kind = nixl::detail::notif_inbox::kind;
  std::lock_guard lk(drain_mu_);
  for (;;) {
    const ssize_t n = ::recv(fd_.get(), buf_.data(), buf_.size(), MSG_TRUNC);
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
    bool abort = false;
    if (!parse_datagram({buf_.data(), static_cast<std::size_t>(n)}, sender, msg, abort)) {
      nixl::log::warn("CUDA notifications: dropped a malformed datagram of {} bytes", n);
      continue;
    }
    if (!inbox.push(abort ? kind::abort : kind::notification, sender, msg))
      nixl::log::warn("CUDA notifications: out of memory; a message from '{}' was dropped", sender);
  }
}

}  // namespace nixl::cuda::detail
