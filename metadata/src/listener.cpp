// Above 600 lines: one poll() loop and its state (listener::state): the steps of the loop
// (accept, pump, serve, complete, time out) share the state's members and the loop's invariants,
// so they are read together; socket.cpp, frame.cpp and auth.cpp hold what stands apart.
// The peer-to-peer part of the exchange: listener and outgoing requests on one poll() loop.
#include "listener.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nixl/detail/event_fd.hpp>
#include <nixl/log.hpp>
#include <nixl/metadata/auth.hpp>
#include <nixl/status.hpp>

#include "socket.hpp"

namespace nixl::metadata::detail {

using namespace std::chrono_literals;

namespace {

/// One outgoing request and the promise its caller holds.
struct request {
  endpoint ep;
  frame_type type{};
  std::string frame;                // encoded request
  std::optional<auth_nonce> nonce;  // set when the request is authenticated
  std::promise<void> done;
};

/// One TCP connection, accepted by the listener or opened for a request.
struct connection {
  unique_fd fd;
  std::string peer;
  bool connecting = false;
  frame_decoder decoder;
  std::string out;
  std::size_t out_pos = 0;
  clock::time_point deadline;
  std::optional<request> req;  // set for outgoing connections
  bool closed = false;

  explicit connection(std::size_t max_frame) : decoder(max_frame) {}
  bool outgoing() const noexcept { return req.has_value(); }
  bool wants_write() const noexcept { return connecting || out_pos < out.size(); }
};

constexpr std::size_t read_chunk = 64 * 1024;
// Bytes read from one connection per loop turn, so a fast client cannot starve the others.
constexpr std::size_t read_budget = 4 * read_chunk;

}  // namespace

struct listener::state {
  const std::string& name;
  const config& cfg;
  const hooks& h;
  const bool threaded;
  std::optional<authenticator> auth;  // with a metadata secret

  unique_fd listen_fd;
  std::uint16_t port = 0;
  nixl::detail::event_fd wake;
  std::thread io_thread;
  std::mutex io_mutex;
  std::vector<request> submitted;  // guarded by io_mutex
  std::atomic<bool> stop{false};

  state(const context& ctx, bool t) : name(ctx.name), cfg(ctx.cfg), h(ctx.h), threaded(t) {
    if (!cfg.metadata_secret.empty()) auth.emplace(cfg.metadata_secret);
  }

  void wake_io() noexcept { wake.signal(); }

  request make_request(std::string_view call, std::string_view ip, std::uint16_t p, frame_type type,
                       std::string_view payload) {
    request r;
    r.ep = resolve(ip, p, call);
    r.type = type;
    if (payload.size() > std::numeric_limits<std::uint32_t>::max()) {
      nixl::raise(status::invalid_param, "{}: payload of {} bytes is too large for one frame", call,
                  payload.size());
    }
    if (auth) {
      auth_nonce n{};
      r.frame = auth->seal(type, payload, std::nullopt, &n);
      r.nonce = n;
    } else {
      r.frame = encode_frame(type, payload);
    }
    return r;
  }

  std::future<void> submit(request r) {
    auto f = r.done.get_future();
    if (!threaded) {
      run_inline(std::move(r));
      return f;
    }
    {
      std::lock_guard lk(io_mutex);
      if (stop) {
        r.done.set_exception(make_error(status::canceled, "metadata exchange is shutting down"));
        return f;
      }
      submitted.push_back(std::move(r));
    }
    wake_io();
    return f;
  }

  void fail(request& r, status s, std::string msg) {
    log::warn("metadata {}: {}", to_string(r.type), msg);
    r.done.set_exception(make_error(s, std::move(msg)));
  }

  /// Opens the connection of a request; on failure the request's promise is failed.
  std::optional<connection> open(request&& r) {
    connection c(cfg.max_frame);
    try {
      c.fd = start_connect(r.ep);
    } catch (const nixl::error& e) {
      fail(r, e.status_code(), e.what());
      return std::nullopt;
    }
    c.peer = r.ep.text;
    c.connecting = true;
    c.out = std::move(r.frame);
    c.deadline = clock::now() + cfg.io_timeout;
    c.req.emplace(std::move(r));
    return c;
  }

  void close_conn(connection& c) noexcept {
    c.fd.reset();
    c.closed = true;
  }

  void fail_conn(connection& c, status s, std::string msg) {
    if (c.req) {
      fail(*c.req, s, fmt::format("{}: {}", c.peer, msg));
      c.req.reset();  // its promise is satisfied; nothing may touch it again
    }
    close_conn(c);
  }

  /// A request's reply arrived.
  void complete(connection& c, frame& f) {
    request& r = *c.req;
    if (auth && !open_reply(c, f)) return;
    if (f.type == frame_type::error) {
      auto [s, msg] = decode_error(f.payload);
      fail(r, s, fmt::format("peer {} refused {}: {}", c.peer, to_string(r.type), msg));
    } else if (r.type == frame_type::fetch && f.type == frame_type::load) {
      try {
        std::string got = h.load(bytes_of(f.payload));
        log::debug("metadata: loaded '{}' fetched from {}", got, c.peer);
        r.done.set_value();
      } catch (...) {
        auto [s, msg] = describe(std::current_exception());
        fail(r, s, fmt::format("loading metadata fetched from {}: {}", c.peer, msg));
      }
    } else if (r.type != frame_type::fetch && f.type == frame_type::ack) {
      r.done.set_value();
    } else {
      fail(
          r, status::mismatch,
          fmt::format("peer {} answered {} with {}", c.peer, to_string(r.type), to_string(f.type)));
    }
    c.req.reset();
    close_conn(c);
  }

  /// With a secret: checks and unwraps the reply to an authenticated request. False when the
  /// request failed (the reply was not authenticated, or did not verify).
  bool open_reply(connection& c, frame& f) {
    request& r = *c.req;
    std::string why;
    if (f.type == frame_type::auth) {
      try {
        auth_frame a = auth->open(f.payload, r.nonce);
        f.type = a.type;
        f.payload = std::move(a.payload);
        return true;
      } catch (const nixl::error& e) {
        why = e.what();
      }
    } else if (f.type == frame_type::error) {
      auto [s, msg] = decode_error(f.payload);
      fail_conn(c, s,
                fmt::format("refused {} (unauthenticated reply): {}", to_string(r.type), msg));
      return false;
    } else {
      why =
          fmt::format("answered {} without authentication; give the peer the same metadata_secret",
                      to_string(r.type));
    }
    fail_conn(c, status::not_allowed, why);
    return false;
  }

  /// Queues a plain ERROR for a request refused before it was served, and logs the refusal.
  void refuse(connection& c, status code, std::string_view why) {
    ++rejected;
    log::warn("metadata listener of '{}': refused a request from {}: {}", name, c.peer, why);
    append_frame(c.out, frame_type::error, encode_error(code, why));
    c.deadline = clock::now() + cfg.io_timeout;
  }

  /// Checks and unwraps an authenticated request (with a secret), or refuses an authenticated
  /// one (without). False when the request was refused.
  bool open_request(connection& c, frame& f, std::optional<auth_nonce>& answer) {
    if (!auth) {
      if (f.type != frame_type::auth) return true;
      refuse(c, status::not_supported,
             "this listener has no metadata_secret, the sender uses one; give both sides the "
             "same secret (or none)");
      return false;
    }
    if (f.type != frame_type::auth) {
      refuse(c, status::not_allowed,
             fmt::format("this listener accepts only authenticated metadata (metadata_secret / "
                         "NIXL_METADATA_SECRET); the {} request was not authenticated",
                         to_string(f.type)));
      return false;
    }
    try {
      auth_frame a = auth->open(f.payload, std::nullopt);
      f.type = a.type;
      f.payload = std::move(a.payload);
      answer = a.nonce;
      return true;
    } catch (const nixl::error& e) {
      refuse(c, e.status_code(), e.what());
      return false;
    }
  }

  /// A client's request arrived at our listener; queue the reply.
  void serve(connection& c, frame& f) {
    std::optional<auth_nonce> answer;  // nonce of an authenticated request
    if (!open_request(c, f, answer)) return;
    // Replies to an authenticated request are authenticated and bound to it.
    auto reply = [&](frame_type t, std::string_view payload) {
      if (answer)
        c.out += auth->seal(t, payload, answer);
      else
        append_frame(c.out, t, payload);
    };
    auto reply_error = [&](status s, std::string_view msg) {
      reply(frame_type::error, encode_error(s, msg));
    };
    switch (f.type) {
      case frame_type::load:
        try {
          std::string got = h.load(bytes_of(f.payload));
          log::debug("metadata: loaded '{}' sent by {}", got, c.peer);
          reply(frame_type::ack, {});
        } catch (...) {
          auto [s, msg] = describe(std::current_exception());
          log::warn("metadata: refused metadata sent by {}: {}", c.peer, msg);
          reply_error(s, msg);
        }
        break;
      case frame_type::fetch:
        if (!f.payload.empty() && f.payload != name) {
          reply_error(status::not_found,
                      fmt::format("this listener serves agent '{}', not '{}'", name, f.payload));
          break;
        }
        try {
          std::string blob = h.full_metadata();
          if (blob.size() > std::numeric_limits<std::uint32_t>::max()) {
            reply_error(status::invalid_param, "full metadata exceeds the 4 GiB frame limit");
          } else {
            reply(frame_type::load, blob);
          }
        } catch (...) {
          auto [s, msg] = describe(std::current_exception());
          reply_error(s, msg);
        }
        break;
      case frame_type::invalidate:
        try {
          h.invalidate(f.payload);
          log::debug("metadata: '{}' invalidated by {}", f.payload, c.peer);
          reply(frame_type::ack, {});
        } catch (...) {
          auto [s, msg] = describe(std::current_exception());
          reply_error(s, msg);
        }
        break;
      case frame_type::ack:
      case frame_type::error:
      case frame_type::auth:
        reply_error(status::invalid_param, "unexpected reply frame sent as a request");
        ++rejected;
        log::info("metadata listener: {} sent a {} frame as a request; closing", c.peer,
                  to_string(f.type));
        flush(c);
        close_conn(c);
        return;
    }
    ++served;
    // A client has io_timeout for its next frame.
    c.deadline = clock::now() + cfg.io_timeout;
  }

  /// Writes what is queued; false when the connection failed.
  bool flush(connection& c) {
    while (c.out_pos < c.out.size()) {
      ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_pos += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      fail_conn(c, status::remote_disconnect, fmt::format("send: {}", errno_text(errno)));
      return false;
    }
    c.out.clear();
    c.out_pos = 0;
    return true;
  }

  /// Serves the complete requests buffered on a client connection, one at a time: the next is
  /// taken only once the previous reply left, so a client that sends requests without reading
  /// replies cannot make us buffer more than one reply. False when the connection was closed.
  bool drain_requests(connection& c) {
    frame f;
    while (c.out_pos >= c.out.size()) {
      auto r = c.decoder.next(f);
      if (r == frame_decoder::result::need_more) return true;
      if (r == frame_decoder::result::error) {
        ++rejected;
        log::info("metadata listener: closing {}: {}", c.peer, c.decoder.error_message());
        close_conn(c);
        return false;
      }
      serve(c, f);
      if (c.closed || !flush(c)) return false;
    }
    return true;
  }

  /// Runs one connection after poll() reported `revents` for it.
  void pump(connection& c, short revents) {
    if (c.closed) return;
    if (c.connecting) {
      if ((revents & (POLLOUT | POLLERR | POLLHUP)) == 0) return;
      if (int e = socket_error(c.fd.get()); e != 0) {
        fail_conn(c, status::remote_disconnect,
                  fmt::format("connect: {}; is the peer running with enable_listen_thread on "
                              "that port?",
                              errno_text(e)));
        return;
      }
      c.connecting = false;
    }
    if (c.out_pos < c.out.size() && !flush(c)) return;
    if (!c.outgoing() && !drain_requests(c)) return;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    std::size_t budget = read_budget;
    char buf[read_chunk];
    // A client whose reply is still queued is not read (see drain_requests).
    while (budget > 0 && !c.closed && (c.outgoing() || c.out_pos >= c.out.size())) {
      ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        on_eof(c, n < 0 ? errno_text(errno) : std::string("connection closed"));
        return;
      }
      budget -= std::min(budget, static_cast<std::size_t>(n));
      c.decoder.append(std::string_view(buf, static_cast<std::size_t>(n)));
      if (!c.outgoing()) {
        if (!drain_requests(c)) return;
        continue;
      }
      frame f;
      auto r = c.decoder.next(f);
      if (r == frame_decoder::result::error) {
        fail_conn(c, status::mismatch,
                  fmt::format("malformed reply: {}", c.decoder.error_message()));
        return;
      }
      if (r == frame_decoder::result::frame) {
        complete(c, f);
        return;
      }
    }
  }

  void on_eof(connection& c, std::string why) {
    if (c.outgoing()) {
      fail_conn(c, status::remote_disconnect, fmt::format("no reply ({})", why));
      return;
    }
    if (c.decoder.mid_frame()) {
      ++rejected;
      log::info("metadata listener: {} closed in the middle of a frame ({} bytes buffered)", c.peer,
                c.decoder.buffered());
    }
    close_conn(c);
  }

  void on_timeout(connection& c) {
    if (c.outgoing()) {
      fail_conn(c, status::remote_disconnect,
                fmt::format("no reply within {} ms{}", cfg.io_timeout.count(),
                            c.connecting ? " (connect did not complete)" : ""));
      return;
    }
    ++timed_out;
    log::info("metadata listener: closing {}: {} within {} ms", c.peer,
              c.decoder.mid_frame() ? "frame incomplete" : "no request", cfg.io_timeout.count());
    close_conn(c);
  }

  // Counters for tests and diagnostics.
  std::atomic<std::uint64_t> accepted{0}, served{0}, rejected{0}, timed_out{0};

  static int poll_timeout(clock::time_point now, clock::time_point deadline) {
    if (deadline <= now) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    return static_cast<int>(std::min<std::int64_t>(ms, 1000));
  }

  /// Without threads, a request runs to completion on the caller's thread.
  void run_inline(request&& r) {
    auto c = open(std::move(r));
    if (!c) return;
    while (!c->closed) {
      auto now = clock::now();
      if (now >= c->deadline) {
        on_timeout(*c);
        break;
      }
      pollfd p{c->fd.get(), static_cast<short>(POLLIN | (c->wants_write() ? POLLOUT : 0)), 0};
      int n = ::poll(&p, 1, poll_timeout(now, c->deadline));
      if (n < 0 && errno != EINTR) {
        fail_conn(*c, status::backend, fmt::format("poll: {}", errno_text(errno)));
        break;
      }
      if (n > 0) pump(*c, p.revents);
    }
  }

  void accept_all(std::list<connection>& conns) {
    for (;;) {
      sockaddr_storage a{};
      socklen_t len = sizeof a;
      int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&a), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          log::warn("metadata listener: accept: {}", errno_text(errno));
        }
        return;
      }
      unique_fd sock(fd);
      std::size_t clients = std::count_if(conns.begin(), conns.end(),
                                          [](const connection& c) { return !c.outgoing(); });
      if (clients >= cfg.max_connections) {
        ++rejected;
        log::info("metadata listener: {} clients already; refusing {}", clients, to_string(a));
        continue;  // closed by unique_fd
      }
      ++accepted;
      connection c(cfg.max_frame);
      c.fd = std::move(sock);
      c.peer = to_string(a);
      c.deadline = clock::now() + cfg.io_timeout;
      conns.push_back(std::move(c));
    }
  }

  void io_loop() {
    std::list<connection> conns;
    std::vector<pollfd> pfds;
    std::vector<connection*> polled;
    while (!stop) {
      {
        std::vector<request> fresh;
        {
          std::lock_guard lk(io_mutex);
          fresh.swap(submitted);
        }
        for (auto& r : fresh) {
          if (auto c = open(std::move(r))) conns.push_back(std::move(*c));
        }
      }
      auto now = clock::now();
      auto next = now + 1s;
      pfds.clear();
      polled.clear();
      pfds.push_back({wake.get(), POLLIN, 0});
      pfds.push_back({listen_fd ? listen_fd.get() : -1, POLLIN, 0});
      for (auto& c : conns) {
        // A client with a reply still queued is only written to (see drain_requests).
        short ev = c.wants_write() ? POLLOUT : 0;
        if (c.outgoing() || !c.wants_write()) ev |= POLLIN;
        pfds.push_back({c.fd.get(), ev, 0});
        polled.push_back(&c);
        next = std::min(next, c.deadline);
      }
      int n = ::poll(pfds.data(), pfds.size(), poll_timeout(now, next));
      if (n < 0 && errno != EINTR) {
        log::error("metadata exchange: poll: {}", errno_text(errno));
        std::this_thread::sleep_for(10ms);
        continue;
      }
      if (n > 0) {
        if (pfds[0].revents & POLLIN) wake.drain();
        for (std::size_t i = 0; i < polled.size(); ++i) {
          if (pfds[i + 2].revents != 0) pump(*polled[i], pfds[i + 2].revents);
        }
        if (pfds[1].revents & POLLIN) accept_all(conns);
      }
      now = clock::now();
      for (auto& c : conns) {
        if (!c.closed && now >= c.deadline) on_timeout(c);
      }
      conns.remove_if([](const connection& c) { return c.closed; });
    }
    // Shutting down: whatever is in flight fails.
    for (auto& c : conns) {
      if (c.req)
        c.req->done.set_exception(make_error(status::canceled, "metadata exchange stopped"));
    }
    std::lock_guard lk(io_mutex);
    for (auto& r : submitted) {
      r.done.set_exception(make_error(status::canceled, "metadata exchange stopped"));
    }
    submitted.clear();
  }
};

listener::listener(const context& ctx, bool threaded) : s_(std::make_unique<state>(ctx, threaded)) {
  auto& m = *s_;
  if (m.cfg.listen) {
    auto ep = resolve(m.cfg.listen_address, m.cfg.listen_port, "metadata listener");
    m.listen_fd = listen_on(ep, 128);
    m.port = local_port(m.listen_fd.get());
    log::info("metadata listener of '{}' is listening on {}", m.name, to_string([&] {
                auto a = ep.addr;
                if (a.ss_family == AF_INET)
                  reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(m.port);
                else
                  reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(m.port);
                return a;
              }()));
  }
  if (threaded) {
    if (!m.wake.open())
      nixl::raise(status::backend, "metadata exchange: eventfd: {}", errno_text(errno));
    m.io_thread = std::thread([&m] { m.io_loop(); });
  }
}

listener::~listener() {
  auto& m = *s_;
  {
    std::lock_guard lk(m.io_mutex);
    m.stop = true;
  }
  m.wake_io();
  if (m.io_thread.joinable()) m.io_thread.join();
}

std::uint16_t listener::port() const noexcept {
  return s_->port;
}

std::future<void> listener::send_frame(std::string_view call, std::string_view ip,
                                       std::uint16_t port, frame_type type,
                                       std::string_view payload) {
  return s_->submit(s_->make_request(call, ip, port, type, payload));
}

listener_stats listener::stats() const noexcept {
  return {s_->accepted.load(), s_->served.load(), s_->rejected.load(), s_->timed_out.load()};
}

}  // namespace nixl::metadata::detail
