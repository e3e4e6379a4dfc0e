#pragma once
// Small RAII and helper layer over BSD sockets for the metadata exchange (private header).

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <nixl/detail/unique_fd.hpp>

namespace nixl::metadata::detail {

using nixl::detail::unique_fd;

/// A resolved socket address.
struct endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string text;  // "127.0.0.1:8888" or "[::1]:8888", for messages
};

/// Resolves a numeric IPv4/IPv6 address or a host name (first result). Throws nixl::error.
endpoint resolve(std::string_view host, std::uint16_t port, std::string_view call);

/// "ip:port" of a socket address.
std::string to_string(const sockaddr_storage& a);

/// Throws nixl::error(invalid_param) unless `address` is a numeric IPv4 or IPv6 address.
void check_listen_address(std::string_view address);

/// Creates a non-blocking listening socket bound to `ep`. Throws nixl::error.
unique_fd listen_on(const endpoint& ep, int backlog);

/// Port a socket is bound to.
std::uint16_t local_port(int fd);

/// Starts a non-blocking connect; returns the socket (connect may still be in progress).
/// Throws nixl::error when the socket cannot even be created or the connect fails at once.
unique_fd start_connect(const endpoint& ep);

/// Pending error of a socket (SO_ERROR), 0 when none.
int socket_error(int fd) noexcept;

/// strerror of an errno value.
std::string errno_text(int e);

}  // namespace nixl::metadata::detail
