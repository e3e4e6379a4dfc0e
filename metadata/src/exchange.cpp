#include <nixl/metadata/exchange.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nixl/log.hpp>
#include <nixl/metadata/etcd.hpp>
#include <nixl/status.hpp>

#include "socket.hpp"

namespace nixl::md {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// config

config config::resolved() const {
  config c = *this;
  if (c.read_env) {
    if (c.etcd_endpoints.empty()) {
      if (const char* e = std::getenv("NIXL_ETCD_ENDPOINTS")) c.etcd_endpoints = e;
    }
    if (c.etcd_namespace.empty()) {
      if (const char* n = std::getenv("NIXL_ETCD_NAMESPACE")) c.etcd_namespace = n;
    }
  }
  while (!c.etcd_namespace.empty() && c.etcd_namespace.back() == '/') c.etcd_namespace.pop_back();
  if (c.etcd_namespace.empty()) c.etcd_namespace = "/nixl/agents";
  return c;
}

bool config::runs_threads() const {
  return listen || !resolved().etcd_endpoints.empty();
}

// ---------------------------------------------------------------------------------------------
// shared helpers

namespace {

std::exception_ptr make_error(status s, std::string msg) {
  return std::make_exception_ptr(nixl::error(s, std::move(msg)));
}

/// The status and message of an exception thrown by a hook.
std::pair<status, std::string> describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const nixl::error& x) {
    return {x.status_code(), x.what()};
  } catch (const std::exception& x) {
    return {status::unknown, x.what()};
  } catch (...) {
    return {status::unknown, "unknown exception"};
  }
}

std::span<const std::byte> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

void check_name(std::string_view what, std::string_view call, std::string_view v) {
  if (v.empty() || v.find('/') != std::string_view::npos) {
    nixl::raise(status::invalid_param,
                "{}: {} '{}' cannot be used in an etcd key; it must be non-empty and contain no "
                "'/'",
                call, what, v);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// peer-to-peer part

namespace {

/// One outgoing request and the promise its caller holds.
struct request {
  detail::endpoint ep;
  frame_type type{};
  std::string frame;  // encoded request
  std::promise<void> done;
};

/// One TCP connection, accepted by the listener or opened for a request.
struct connection {
  detail::unique_fd fd;
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

struct exchange::impl {
  std::string name;
  config cfg;
  hooks h;
  bool threaded = false;

  // --- peer to peer
  detail::unique_fd listener;
  std::uint16_t port = 0;
  detail::unique_fd wake;  // eventfd
  std::thread io_thread;
  std::mutex io_mutex;
  std::vector<request> submitted;  // guarded by io_mutex
  std::atomic<bool> stop{false};

  // --- etcd
  std::unique_ptr<etcd_client> etcd;
  std::unique_ptr<etcd_watcher> watcher;
  std::thread etcd_thread;
  std::mutex etcd_mutex;
  std::deque<std::function<void()>> etcd_tasks;  // guarded by etcd_mutex
  std::int64_t lease = 0;
  clock::time_point next_keepalive{};
  std::map<std::string, std::string, std::less<>> published;  // label -> blob
  struct peer_watch {
    etcd_watcher::id wid = 0;
    std::int64_t revision = 0;  // last revision seen
    clock::time_point retry{};  // when a broken watch is re-created
  };
  std::map<std::string, peer_watch, std::less<>> peers;  // agent -> watch of its prefix
  struct waiter {
    std::string agent, label, key;
    etcd_watcher::id wid = 0;
    clock::time_point deadline;
    clock::time_point retry{};
    std::promise<void> done;
  };
  std::list<waiter> waiters;

  // ------------------------------------------------------------------------------------------
  void wake_io() noexcept {
    if (!wake) return;
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake.get(), &one, sizeof one);
  }

  std::string key(std::string_view agent, std::string_view label) const {
    return fmt::format("{}/{}/{}", cfg.etcd_namespace, agent, label);
  }
  std::string prefix(std::string_view agent) const {
    return fmt::format("{}/{}/", cfg.etcd_namespace, agent);
  }

  // ------------------------------------------------------------------------------------------
  // requests

  request make_request(std::string_view call, std::string_view ip, std::uint16_t p, frame_type type,
                       std::string_view payload) {
    request r;
    r.ep = detail::resolve(ip, p, call);
    r.type = type;
    if (payload.size() > std::numeric_limits<std::uint32_t>::max()) {
      nixl::raise(status::invalid_param, "{}: payload of {} bytes is too large for one frame", call,
                  payload.size());
    }
    r.frame = encode_frame(type, payload);
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
      c.fd = detail::start_connect(r.ep);
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

  /// A client's request arrived at our listener; queue the reply.
  void serve(connection& c, frame& f) {
    auto reply_error = [&](status s, std::string_view msg) {
      append_frame(c.out, frame_type::error, encode_error(s, msg));
    };
    switch (f.type) {
      case frame_type::load:
        try {
          std::string got = h.load(bytes_of(f.payload));
          log::debug("metadata: loaded '{}' sent by {}", got, c.peer);
          append_frame(c.out, frame_type::ack, {});
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
            append_frame(c.out, frame_type::load, blob);
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
          append_frame(c.out, frame_type::ack, {});
        } catch (...) {
          auto [s, msg] = describe(std::current_exception());
          reply_error(s, msg);
        }
        break;
      case frame_type::ack:
      case frame_type::error:
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
      fail_conn(c, status::remote_disconnect, fmt::format("send: {}", detail::errno_text(errno)));
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
      if (int e = detail::socket_error(c.fd.get()); e != 0) {
        fail_conn(c, status::remote_disconnect,
                  fmt::format("connect: {}; is the peer running with enable_listen_thread on "
                              "that port?",
                              detail::errno_text(e)));
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
        on_eof(c, n < 0 ? detail::errno_text(errno) : std::string("connection closed"));
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
        fail_conn(*c, status::backend, fmt::format("poll: {}", detail::errno_text(errno)));
        break;
      }
      if (n > 0) pump(*c, p.revents);
    }
  }

  void accept_all(std::list<connection>& conns) {
    for (;;) {
      sockaddr_storage a{};
      socklen_t len = sizeof a;
      int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&a), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          log::warn("metadata listener: accept: {}", detail::errno_text(errno));
        }
        return;
      }
      detail::unique_fd sock(fd);
      std::size_t clients = std::count_if(conns.begin(), conns.end(),
                                          [](const connection& c) { return !c.outgoing(); });
      if (clients >= cfg.max_connections) {
        ++rejected;
        log::info("metadata listener: {} clients already; refusing {}", clients,
                  detail::to_string(a));
        continue;  // closed by unique_fd
      }
      ++accepted;
      connection c(cfg.max_frame);
      c.fd = std::move(sock);
      c.peer = detail::to_string(a);
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
      pfds.push_back({listener ? listener.get() : -1, POLLIN, 0});
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
        log::error("metadata exchange: poll: {}", detail::errno_text(errno));
        std::this_thread::sleep_for(10ms);
        continue;
      }
      if (n > 0) {
        if (pfds[0].revents & POLLIN) {
          std::uint64_t v;
          [[maybe_unused]] auto r = ::read(wake.get(), &v, sizeof v);
        }
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

  // ------------------------------------------------------------------------------------------
  // etcd part (runs on etcd_thread)

  std::future<void> post_etcd(std::function<void(std::promise<void>&)> fn) {
    auto p = std::make_shared<std::promise<void>>();
    auto f = p->get_future();
    {
      std::lock_guard lk(etcd_mutex);
      if (stop) {
        p->set_exception(make_error(status::canceled, "metadata exchange is shutting down"));
        return f;
      }
      etcd_tasks.push_back([p, fn = std::move(fn)] {
        try {
          fn(*p);
        } catch (...) {
          auto [s, msg] = describe(std::current_exception());
          log::warn("metadata (etcd): {}", msg);
          p->set_exception(std::current_exception());
        }
      });
    }
    watcher->wakeup();
    return f;
  }

  void ensure_lease() {
    if (lease != 0) return;
    lease = etcd->lease_grant(cfg.etcd_lease_ttl);
    next_keepalive = clock::now() + keepalive_period();
    log::debug("metadata (etcd): lease {:x} granted for '{}'", lease, name);
  }

  std::chrono::milliseconds keepalive_period() const {
    auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.etcd_lease_ttl);
    return std::max<std::chrono::milliseconds>(ttl / 3, 200ms);
  }

  void keepalive() {
    if (lease == 0 || clock::now() < next_keepalive) return;
    try {
      if (etcd->lease_keepalive(lease) > 0) {
        next_keepalive = clock::now() + keepalive_period();
        return;
      }
      // The lease expired (etcd restarted or this process stalled): put our keys back.
      log::warn("metadata (etcd): lease of '{}' expired; publishing {} key(s) again", name,
                published.size());
      lease = 0;
      ensure_lease();
      for (const auto& [label, blob] : published) etcd->put(key(name, label), blob, lease);
    } catch (const std::exception& e) {
      log::warn("metadata (etcd): keep-alive of '{}' failed: {}", name, e.what());
      next_keepalive = clock::now() + 1s;
    }
  }

  /// Loads a peer's value and starts watching the peer.
  void load_central(std::string_view agent, std::string_view k, const std::string& value,
                    std::int64_t revision) {
    std::string got;
    try {
      got = h.load(bytes_of(value));
    } catch (...) {
      auto [s, msg] = describe(std::current_exception());
      nixl::raise(s, "fetch_central: loading '{}': {}", k, msg);
    }
    if (got != agent) {
      nixl::raise(status::mismatch,
                  "fetch_central: key '{}' holds metadata of agent '{}', not '{}'", k, got, agent);
    }
    watch_peer(agent, revision);
  }

  void watch_peer(std::string_view agent, std::int64_t revision) {
    auto it = peers.find(agent);
    if (it != peers.end() && it->second.wid != 0) return;
    if (it == peers.end()) it = peers.emplace(std::string(agent), peer_watch{}).first;
    it->second.revision = revision;
    it->second.wid = watcher->watch(prefix(agent), true, revision + 1);
  }

  void fetch_central(std::string agent, std::string label, std::promise<void>& done) {
    const std::string k = key(agent, label);
    auto r = etcd->get(k);
    if (!r.kvs.empty() && !r.kvs.front().value.empty()) {
      load_central(agent, k, r.kvs.front().value, r.revision);
      done.set_value();
      return;
    }
    // Not there yet: watch the key and wait, bounded.
    waiter w;
    w.agent = std::move(agent);
    w.label = std::move(label);
    w.key = k;
    w.deadline = clock::now() + std::chrono::duration_cast<clock::duration>(cfg.etcd_watch_timeout);
    w.wid = watcher->watch(k, false, r.revision + 1);
    w.done = std::move(done);
    waiters.push_back(std::move(w));
  }

  void finish_waiter(std::list<waiter>::iterator it, const std::string& value,
                     std::int64_t revision) {
    watcher->cancel(it->wid);
    try {
      load_central(it->agent, it->key, value, revision);
      it->done.set_value();
    } catch (...) {
      auto [s, msg] = describe(std::current_exception());
      log::warn("metadata (etcd): {}", msg);
      it->done.set_exception(std::current_exception());
    }
    waiters.erase(it);
  }

  void handle(const etcd_watcher::update& u) {
    auto w = std::find_if(waiters.begin(), waiters.end(),
                          [&](const waiter& x) { return x.wid == u.watch; });
    if (w != waiters.end()) {
      if (!u.event) {
        log::info("metadata (etcd): watch of '{}' broke ({}); retrying", w->key, u.error);
        w->wid = 0;
        w->retry = clock::now() + 200ms;
      } else if (u.event->type == etcd_event::kind::put && !u.event->value.empty()) {
        finish_waiter(w, u.event->value, u.event->revision);
      }
      return;
    }
    for (auto it = peers.begin(); it != peers.end(); ++it) {
      auto& pw = it->second;
      if (pw.wid != u.watch) continue;
      if (!u.event) {
        log::info("metadata (etcd): watch of '{}' broke ({}); retrying", it->first, u.error);
        pw.wid = 0;
        pw.retry = clock::now() + 200ms;
        return;
      }
      pw.revision = std::max(pw.revision, u.event->revision);
      if (u.event->type == etcd_event::kind::del) {
        std::string agent = it->first;
        watcher->cancel(pw.wid);
        peers.erase(it);
        log::info("metadata (etcd): '{}' left the central store; invalidating it", agent);
        try {
          h.invalidate(agent);
        } catch (const std::exception& e) {
          log::warn("metadata (etcd): invalidating '{}': {}", agent, e.what());
        }
      }
      return;
    }
  }

  /// Re-creates broken watches; a peer whose keys are gone meanwhile is invalidated.
  void repair() {
    auto now = clock::now();
    for (auto it = peers.begin(); it != peers.end();) {
      auto& pw = it->second;
      if (pw.wid != 0 || now < pw.retry) {
        ++it;
        continue;
      }
      try {
        auto r = etcd->get_prefix(prefix(it->first));
        if (r.kvs.empty()) {
          std::string agent = it->first;
          it = peers.erase(it);
          log::info("metadata (etcd): '{}' left the central store; invalidating it", agent);
          try {
            h.invalidate(agent);
          } catch (const std::exception& e) {
            log::warn("metadata (etcd): invalidating '{}': {}", agent, e.what());
          }
          continue;
        }
        pw.revision = r.revision;
        watcher->set_endpoint(etcd->endpoint());  // follows the client's fail-over
        pw.wid = watcher->watch(prefix(it->first), true, r.revision + 1);
      } catch (const std::exception& e) {
        pw.retry = now + 1s;
        log::debug("metadata (etcd): cannot re-watch '{}': {}", it->first, e.what());
      }
      ++it;
    }
    for (auto it = waiters.begin(); it != waiters.end();) {
      auto cur = it++;
      if (cur->wid != 0 || now < cur->retry) continue;
      try {
        auto r = etcd->get(cur->key);
        if (!r.kvs.empty() && !r.kvs.front().value.empty()) {
          finish_waiter(cur, r.kvs.front().value, r.revision);
          continue;
        }
        watcher->set_endpoint(etcd->endpoint());
        cur->wid = watcher->watch(cur->key, false, r.revision + 1);
      } catch (const std::exception& e) {
        cur->retry = now + 500ms;
        log::debug("metadata (etcd): cannot re-watch '{}': {}", cur->key, e.what());
      }
    }
  }

  void expire_waiters() {
    auto now = clock::now();
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.etcd_watch_timeout);
      std::string msg = fmt::format(
          "fetch_central: no metadata of agent '{}' under '{}' after {} ms; is the agent running "
          "and has it published (send_local_metadata / label '{}')?",
          it->agent, it->key, ms.count(), it->label);
      log::warn("metadata (etcd): {}", msg);
      if (it->wid != 0) watcher->cancel(it->wid);
      it->done.set_exception(make_error(status::not_found, std::move(msg)));
      it = waiters.erase(it);
    }
  }

  void etcd_loop() {
    std::vector<etcd_watcher::update> updates;
    while (!stop) {
      std::deque<std::function<void()>> tasks;
      {
        std::lock_guard lk(etcd_mutex);
        tasks.swap(etcd_tasks);
      }
      for (auto& t : tasks) t();
      keepalive();
      repair();
      auto now = clock::now();
      auto next = now + 250ms;
      if (lease != 0) next = std::min(next, next_keepalive);
      for (auto& w : waiters) next = std::min(next, w.deadline);
      updates.clear();
      try {
        watcher->poll(
            std::chrono::ceil<std::chrono::milliseconds>(std::max(next - now, clock::duration{})),
            updates);
      } catch (const std::exception& e) {
        log::warn("metadata (etcd): watch: {}", e.what());
      }
      for (auto& u : updates) handle(u);
      expire_waiters();
    }
    std::deque<std::function<void()>> tasks;
    {
      std::lock_guard lk(etcd_mutex);
      tasks.swap(etcd_tasks);
    }
    // Tasks queued before the stop still complete, as far as etcd answers in time.
    for (auto& t : tasks) t();
    for (auto& w : waiters) {
      w.done.set_exception(
          make_error(status::canceled, "metadata exchange stopped while waiting for " + w.key));
    }
    waiters.clear();
  }
};

// ---------------------------------------------------------------------------------------------
// exchange

exchange::exchange(std::string agent_name, config cfg, hooks h) : impl_(std::make_unique<impl>()) {
  auto& m = *impl_;
  m.name = std::move(agent_name);
  m.cfg = cfg.resolved();
  m.h = std::move(h);
  if (!m.h.full_metadata || !m.h.load || !m.h.invalidate) {
    nixl::raise(status::invalid_param, "metadata exchange of '{}': every hook must be set", m.name);
  }
  if (m.cfg.max_frame == 0 || m.cfg.max_frame > std::numeric_limits<std::uint32_t>::max()) {
    nixl::raise(status::invalid_param,
                "metadata exchange of '{}': max_frame {} must be in 1..4294967295", m.name,
                m.cfg.max_frame);
  }
  m.threaded = m.cfg.listen || !m.cfg.etcd_endpoints.empty();
  if (m.cfg.listen) {
    auto ep = detail::resolve(m.cfg.listen_address, m.cfg.listen_port, "metadata listener");
    m.listener = detail::listen_on(ep, 128);
    m.port = detail::local_port(m.listener.get());
    log::info("metadata listener of '{}' is listening on {}", m.name, detail::to_string([&] {
                auto a = ep.addr;
                if (a.ss_family == AF_INET)
                  reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(m.port);
                else
                  reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(m.port);
                return a;
              }()));
  }
  if (!m.cfg.etcd_endpoints.empty()) {
    m.etcd = std::make_unique<etcd_client>(m.cfg.etcd_endpoints, m.cfg.etcd_request_timeout);
    m.watcher = std::make_unique<etcd_watcher>(m.etcd->endpoint(), m.cfg.etcd_request_timeout);
  }
  if (m.threaded) {
    m.wake = detail::unique_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!m.wake)
      nixl::raise(status::backend, "metadata exchange: eventfd: {}", detail::errno_text(errno));
    m.io_thread = std::thread([&m] { m.io_loop(); });
    if (m.etcd) m.etcd_thread = std::thread([&m] { m.etcd_loop(); });
  }
}

exchange::~exchange() {
  auto& m = *impl_;
  {
    std::scoped_lock lk(m.io_mutex, m.etcd_mutex);
    m.stop = true;
  }
  m.wake_io();
  if (m.watcher) m.watcher->wakeup();
  if (m.io_thread.joinable()) m.io_thread.join();
  if (m.etcd_thread.joinable()) m.etcd_thread.join();
  // Our keys go with the lease now rather than at its expiry.
  if (m.etcd && m.lease != 0) {
    try {
      m.etcd->lease_revoke(m.lease);
    } catch (const std::exception& e) {
      log::warn("metadata (etcd): revoking the lease of '{}': {} (keys expire with it)", m.name,
                e.what());
    }
  }
}

const std::string& exchange::agent_name() const noexcept {
  return impl_->name;
}
std::uint16_t exchange::port() const noexcept {
  return impl_->port;
}
bool exchange::runs_threads() const noexcept {
  return impl_->threaded;
}
bool exchange::has_central() const noexcept {
  return impl_->etcd != nullptr;
}
const config& exchange::settings() const noexcept {
  return impl_->cfg;
}

std::future<void> exchange::send(std::string_view ip, std::uint16_t port, std::string blob) {
  return impl_->submit(
      impl_->make_request("send_local_metadata", ip, port, frame_type::load, blob));
}

std::future<void> exchange::fetch(std::string_view ip, std::uint16_t port,
                                  std::string_view expected_agent) {
  return impl_->submit(
      impl_->make_request("fetch_remote_metadata", ip, port, frame_type::fetch, expected_agent));
}

std::future<void> exchange::invalidate_at(std::string_view ip, std::uint16_t port) {
  return impl_->submit(impl_->make_request("invalidate_local_metadata", ip, port,
                                           frame_type::invalidate, impl_->name));
}

namespace {
[[noreturn]] void no_central(std::string_view call) {
  nixl::raise(status::not_supported,
              "{}: no central metadata store; set NIXL_ETCD_ENDPOINTS (etcd) or give the peer's "
              "ip and port",
              call);
}
}  // namespace

std::future<void> exchange::publish(std::string_view label, std::string blob) {
  auto& m = *impl_;
  if (!m.etcd) no_central("send_local_metadata");
  check_name("label", "send_local_metadata", label);
  check_name("agent name", "send_local_metadata", m.name);
  if (blob.empty()) nixl::raise(status::invalid_param, "send_local_metadata: empty metadata blob");
  return m.post_etcd(
      [&m, label = std::string(label), blob = std::move(blob)](std::promise<void>& p) {
        m.ensure_lease();
        m.etcd->put(m.key(m.name, label), blob, m.lease);
        m.published[label] = blob;
        log::debug("metadata (etcd): published '{}'", m.key(m.name, label));
        p.set_value();
      });
}

std::future<void> exchange::fetch_central(std::string_view agent, std::string_view label) {
  auto& m = *impl_;
  if (!m.etcd) no_central("fetch_remote_metadata");
  check_name("agent name", "fetch_remote_metadata", agent);
  check_name("label", "fetch_remote_metadata", label);
  return m.post_etcd([&m, agent = std::string(agent), label = std::string(label)](
                         std::promise<void>& p) { m.fetch_central(agent, label, p); });
}

std::future<void> exchange::unpublish() {
  auto& m = *impl_;
  if (!m.etcd) no_central("invalidate_local_metadata");
  check_name("agent name", "invalidate_local_metadata", m.name);
  return m.post_etcd([&m](std::promise<void>& p) {
    auto n = m.etcd->delete_prefix(m.prefix(m.name));
    m.published.clear();
    log::debug("metadata (etcd): deleted {} key(s) of '{}'", n, m.name);
    p.set_value();
  });
}

listener_stats exchange::stats() const noexcept {
  return {impl_->accepted.load(), impl_->served.load(), impl_->rejected.load(),
          impl_->timed_out.load()};
}

std::string exchange::central_key(std::string_view agent, std::string_view label) const {
  return impl_->key(agent, label);
}

}  // namespace nixl::md
