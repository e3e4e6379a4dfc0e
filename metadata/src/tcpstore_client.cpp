// Client of the c10d TCPStore wire protocol (both dialects), with a deadline on every request.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nixl/detail/unique_fd.hpp>
#include <nixl/metadata/tcpstore.hpp>
#include <nixl/status.hpp>

#include "socket.hpp"

namespace nixl::metadata {

namespace {

using clock = std::chrono::steady_clock;
using detail::errno_text;
using nixl::detail::unique_fd;

constexpr std::uint32_t validation_magic = 0x3C85F7CE;

/// Query numbers of the two dialects (torch >= 2: VALIDATE first; torch <= 1.13: none).
struct opcodes {
  std::uint8_t set, get, check, num_keys, del;
};
constexpr opcodes current_ops{1, 3, 5, 7, 8};
constexpr opcodes legacy_ops{0, 2, 4, 6, 8};
constexpr std::uint8_t op_validate = 0;
constexpr std::uint8_t op_ping = 13;

/// A failed request: the connection is closed and the caller sees this status.
[[noreturn]] void fail(status s, std::string msg) {
  throw nixl::error(s, std::move(msg));
}

int remaining_ms(clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

void append_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void append_str(std::string& out, std::string_view s) {
  append_u64(out, s.size());
  out.append(s);
}

}  // namespace

tcpstore_endpoint parse_tcpstore_endpoint(std::string_view endpoint) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    nixl::raise(status::invalid_param,
                "NIXL_TCPSTORE_ENDPOINT '{}' must be host:port (e.g. 127.0.0.1:29500)", endpoint);
  }
  std::string_view p = endpoint.substr(colon + 1);
  unsigned v = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (p.empty() || ec != std::errc{} || end != p.data() + p.size() || v == 0 || v > 65535) {
    nixl::raise(status::invalid_param,
                "NIXL_TCPSTORE_ENDPOINT '{}' has invalid port '{}'; it must be 1..65535", endpoint,
                p);
  }
  return {std::string(endpoint.substr(0, colon)), static_cast<std::uint16_t>(v)};
}

std::string tcpstore_key(std::string_view label, std::string_view agent) {
  return fmt::format("nixl/agents/{}/{}/NULL_AGENT", label, agent);
}

struct tcpstore_client::impl {
  std::string text;
  tcpstore_endpoint ep;
  std::chrono::milliseconds op_timeout;
  std::size_t max_value;
  unique_fd fd;
  dialect proto = dialect::unknown;

  const opcodes& ops() const { return proto == dialect::legacy ? legacy_ops : current_ops; }

  [[noreturn]] void broken(status s, std::string_view what, std::string_view why) {
    fd.reset();
    fail(s, fmt::format("TCPStore {}: {}: {}", text, what, why));
  }

  void write_all(std::string_view data, clock::time_point deadline, std::string_view what) {
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::send(fd.get(), data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{fd.get(), POLLOUT, 0};
        int ms = remaining_ms(deadline);
        if (ms == 0 || ::poll(&p, 1, ms) == 0)
          broken(status::remote_disconnect, what,
                 fmt::format("no progress sending within {} ms", op_timeout.count()));
        continue;
      }
      broken(status::remote_disconnect, what, fmt::format("send: {}", errno_text(errno)));
    }
  }

  void read_exact(void* out, std::size_t size, clock::time_point deadline, std::string_view what) {
    auto* p = static_cast<char*>(out);
    std::size_t done = 0;
    while (done < size) {
      ssize_t n = ::recv(fd.get(), p + done, size - done, 0);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      if (n == 0)
        broken(
            status::remote_disconnect, what,
            fmt::format("the store closed the connection after {} of {} reply bytes", done, size));
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd pf{fd.get(), POLLIN, 0};
        int ms = remaining_ms(deadline);
        if (ms == 0 || ::poll(&pf, 1, ms) == 0)
          broken(status::remote_disconnect, what,
                 fmt::format("no reply within {} ms (got {} of {} bytes)", op_timeout.count(), done,
                             size));
        continue;
      }
      broken(status::remote_disconnect, what, fmt::format("recv: {}", errno_text(errno)));
    }
  }

  template <class T>
  T read_pod(clock::time_point deadline, std::string_view what) {
    T v{};
    read_exact(&v, sizeof v, deadline, what);
    return v;
  }

  std::string read_value(clock::time_point deadline, std::string_view what) {
    auto len = read_pod<std::uint64_t>(deadline, what);
    if (len > max_value)
      broken(status::mismatch, what,
             fmt::format("the store announced a value of {} bytes, more than the {} accepted", len,
                         max_value));
    // Grown as the bytes arrive: a length that lies costs no more memory than what was sent.
    constexpr std::size_t chunk = std::size_t{1} << 20;
    std::string v;
    while (v.size() < len) {
      std::size_t at = v.size();
      v.resize(at + std::min<std::size_t>(chunk, static_cast<std::size_t>(len) - at));
      read_exact(v.data() + at, v.size() - at, deadline, what);
    }
    return v;
  }

  /// A connection the server closed (restart) reads as EOF or error before any request.
  bool stale() const {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    return true;  // a store sends nothing unasked: readable means closed or broken
  }

  unique_fd dial(clock::time_point deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(ep.port);
    int rc = ::getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr)
      fail(status::remote_disconnect,
           fmt::format("TCPStore {}: cannot resolve '{}': {}", text, ep.host, ::gai_strerror(rc)));
    std::string errors;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      unique_fd s(::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!s) continue;
      int r = ::connect(s.get(), a->ai_addr, a->ai_addrlen);
      int err = r == 0 ? 0 : errno;
      if (err == EINPROGRESS || err == EINTR) {
        pollfd p{s.get(), POLLOUT, 0};
        int ms = remaining_ms(deadline);
        err = (ms > 0 && ::poll(&p, 1, ms) > 0) ? detail::socket_error(s.get()) : ETIMEDOUT;
      }
      if (err == 0) {
        ::freeaddrinfo(res);
        int one = 1;
        ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return s;
      }
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", errno_text(err));
    }
    ::freeaddrinfo(res);
    fail(status::remote_disconnect,
         fmt::format("TCPStore {}: cannot connect ({}); is the store running?", text, errors));
  }

  /// VALIDATE + PING (current dialect); true when the nonce came back.
  bool handshake_current(clock::time_point deadline) {
    std::string req;
    req.push_back(static_cast<char>(op_validate));
    req.append(reinterpret_cast<const char*>(&validation_magic), sizeof validation_magic);
    auto nonce = static_cast<std::uint32_t>(::getpid());
    req.push_back(static_cast<char>(op_ping));
    req.append(reinterpret_cast<const char*>(&nonce), sizeof nonce);
    try {
      write_all(req, deadline, "handshake");
      if (read_pod<std::uint32_t>(deadline, "handshake") != nonce)
        broken(status::mismatch, "handshake", "PING did not echo the nonce");
      return true;
    } catch (const nixl::error& e) {
      if (proto == dialect::current || e.status_code() == status::mismatch) throw;
      return false;  // a legacy server resets on VALIDATE
    }
  }

  /// GETNUMKEYS of the legacy dialect as the liveness check.
  void handshake_legacy(clock::time_point deadline) {
    std::string req(1, static_cast<char>(legacy_ops.num_keys));
    write_all(req, deadline, "handshake");
    if (read_pod<std::int64_t>(deadline, "handshake") < 0)
      broken(status::mismatch, "handshake", "negative key count");
  }

  void ensure(clock::time_point deadline) {
    if (fd && !stale()) return;
    fd.reset();
    if (proto != dialect::legacy) {
      fd = dial(deadline);
      if (handshake_current(deadline)) {
        proto = dialect::current;
        return;
      }
    }
    fd = dial(deadline);
    try {
      handshake_legacy(deadline);
    } catch (const nixl::error& e) {
      if (proto == dialect::unknown)
        broken(status::remote_disconnect, "handshake",
               fmt::format("neither a current (VALIDATE/PING) nor a legacy TCPStore answered "
                           "({})",
                           e.what()));
      throw;
    }
    proto = dialect::legacy;
  }

  clock::time_point deadline() const { return clock::now() + op_timeout; }

  bool check_key(std::string_view key, clock::time_point dl) {
    std::string req(1, static_cast<char>(ops().check));
    append_u64(req, 1);
    append_str(req, fmt::format("/{}", key));
    write_all(req, dl, "CHECK");
    auto r = read_pod<std::uint8_t>(dl, "CHECK");
    if (r > 1) broken(status::mismatch, "CHECK", fmt::format("unknown reply code {}", r));
    return r == 0;
  }

  template <class Fn>
  auto run(Fn fn) {
    auto dl = deadline();
    ensure(dl);
    return fn(dl);
  }
};

tcpstore_client::tcpstore_client(std::string_view endpoint, std::chrono::milliseconds op_timeout,
                                 std::size_t max_value)
    : impl_(std::make_unique<impl>()) {
  impl_->text = std::string(endpoint);
  impl_->ep = parse_tcpstore_endpoint(endpoint);
  impl_->op_timeout = op_timeout;
  impl_->max_value = max_value;
}

tcpstore_client::~tcpstore_client() = default;

void tcpstore_client::connect(std::chrono::milliseconds budget) {
  impl_->ensure(clock::now() + budget);
}

void tcpstore_client::set(std::string_view key, std::string_view value) {
  impl_->run([&](clock::time_point dl) {
    std::string req(1, static_cast<char>(impl_->ops().set));
    append_str(req, fmt::format("/{}", key));
    append_str(req, value);
    impl_->write_all(req, dl, "SET");
    // SET has no reply: a CHECK behind it confirms the store got it.
    if (!impl_->check_key(key, dl))
      impl_->broken(status::mismatch, "SET", fmt::format("key '{}' absent right after SET", key));
  });
}

std::optional<std::string> tcpstore_client::get(std::string_view key) {
  return impl_->run([&](clock::time_point dl) -> std::optional<std::string> {
    if (!impl_->check_key(key, dl)) return std::nullopt;
    std::string req(1, static_cast<char>(impl_->ops().get));
    append_str(req, fmt::format("/{}", key));
    impl_->write_all(req, dl, "GET");
    std::string v = impl_->read_value(dl, "GET");
    if (v.empty()) return std::nullopt;  // deleted between CHECK and GET
    return v;
  });
}

bool tcpstore_client::check(std::string_view key) {
  return impl_->run([&](clock::time_point dl) { return impl_->check_key(key, dl); });
}

bool tcpstore_client::remove(std::string_view key) {
  return impl_->run([&](clock::time_point dl) {
    std::string req(1, static_cast<char>(impl_->ops().del));
    append_str(req, fmt::format("/{}", key));
    impl_->write_all(req, dl, "DELETE_KEY");
    auto n = impl_->read_pod<std::int64_t>(dl, "DELETE_KEY");
    if (n < 0 || n > 1)
      impl_->broken(status::mismatch, "DELETE_KEY", fmt::format("{} keys deleted", n));
    return n == 1;
  });
}

std::int64_t tcpstore_client::num_keys() {
  return impl_->run([&](clock::time_point dl) {
    std::string req(1, static_cast<char>(impl_->ops().num_keys));
    impl_->write_all(req, dl, "GETNUMKEYS");
    auto n = impl_->read_pod<std::int64_t>(dl, "GETNUMKEYS");
    if (n < 0) impl_->broken(status::mismatch, "GETNUMKEYS", fmt::format("{} keys", n));
    return n;
  });
}

bool tcpstore_client::connected() const noexcept {
  return static_cast<bool>(impl_->fd);
}
void tcpstore_client::close() noexcept {
  impl_->fd.reset();
}
tcpstore_client::dialect tcpstore_client::protocol() const noexcept {
  return impl_->proto;
}
const std::string& tcpstore_client::endpoint() const noexcept {
  return impl_->text;
}

}  // namespace nixl::metadata
