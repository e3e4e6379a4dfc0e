#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nixl/status.hpp>

namespace nixl::metadata::detail {

std::string errno_text(int e) {
  char buf[256];
  // GNU strerror_r returns the message pointer.
  return std::string(::strerror_r(e, buf, sizeof buf));
}

std::string to_string(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(v4->sin_port));
  }
  if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(v6->sin6_port));
  }
  return "?";
}

endpoint resolve(std::string_view host, std::uint16_t port, std::string_view call) {
  // Brackets are accepted around IPv6 literals ("[::1]").
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    nixl::raise(status::invalid_param, "{}: empty address; give an IPv4 or IPv6 address", call);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string h(host);
  const std::string p = std::to_string(port);
  int rc = ::getaddrinfo(h.c_str(), p.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    nixl::raise(status::invalid_param, "{}: cannot resolve address '{}': {}", call, h,
                ::gai_strerror(rc));
  }
  endpoint ep;
  std::memcpy(&ep.addr, res->ai_addr, res->ai_addrlen);
  ep.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  ep.text = to_string(ep.addr);
  return ep;
}

void check_listen_address(std::string_view address) {
  std::string_view a = address;
  if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  const std::string s(a);
  in6_addr buf{};
  if (::inet_pton(AF_INET, s.c_str(), &buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), &buf) == 1)
    return;
  nixl::raise(status::invalid_param,
              "metadata listener: listen_address '{}' is not a numeric IPv4 or IPv6 address; use "
              "an address of this host (e.g. 10.0.0.5), 127.0.0.1 (the default), 0.0.0.0 or ::",
              address);
}

unique_fd listen_on(const endpoint& ep, int backlog) {
  unique_fd fd(::socket(ep.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    nixl::raise(status::backend, "metadata listener: socket(): {}", errno_text(errno));
  }
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ep.addr.ss_family == AF_INET6) {
    // "::" is every address, IPv4 ones included (dual stack); any other IPv6 address is itself.
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(ep.addr).sin6_addr;
    int v6only = IN6_IS_ADDR_UNSPECIFIED(&a6) ? 0 : 1;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&ep.addr), ep.len) != 0) {
    int e = errno;
    nixl::raise(status::backend,
                "metadata listener: bind({}): {}; choose another listen_port (0 lets the system "
                "pick one)",
                ep.text, errno_text(e));
  }
  if (::listen(fd.get(), backlog) != 0) {
    nixl::raise(status::backend, "metadata listener: listen({}): {}", ep.text, errno_text(errno));
  }
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return 0;
}

unique_fd start_connect(const endpoint& ep) {
  unique_fd fd(::socket(ep.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    nixl::raise(status::backend, "metadata connect to {}: socket(): {}", ep.text,
                errno_text(errno));
  }
  // An interrupted non-blocking connect goes on in the background, like EINPROGRESS.
  int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&ep.addr), ep.len);
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    int e = errno;
    nixl::raise(status::remote_disconnect,
                "metadata connect to {}: {}; is the peer running with enable_listen_thread on "
                "that port?",
                ep.text, errno_text(e));
  }
  return fd;
}

int socket_error(int fd) noexcept {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

}  // namespace nixl::metadata::detail
