#pragma once
// The peer-to-peer part of an exchange (private header): a TCP listener serving LOAD, FETCH and
// INVALIDATE frames, and the requests this agent sends to peers' listeners, all driven by one
// poll() event loop on an I/O thread (or run on the caller's thread when the exchange has no
// threads).

#include <cstdint>
#include <future>
#include <memory>
#include <string_view>

#include <nixl/metadata/exchange.hpp>
#include <nixl/metadata/frame.hpp>

#include "common.hpp"

namespace nixl::metadata::detail {

class listener {
 public:
  /// Binds the listening socket when ctx.cfg.listen; with `threaded`, runs the I/O thread.
  /// `ctx` must outlive the listener. Throws nixl::error when the socket cannot be bound.
  listener(const context& ctx, bool threaded);
  /// Stops the I/O thread; requests in flight fail with status::canceled.
  ~listener();
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  /// Port the listener is bound to; 0 without a listener.
  std::uint16_t port() const noexcept;
  /// Sends one request frame to ip:port; the future is ready with the reply (or its error).
  /// `call` names the API call in error messages.
  std::future<void> send_frame(std::string_view call, std::string_view ip, std::uint16_t port,
                               frame_type type, std::string_view payload);
  listener_stats stats() const noexcept;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace nixl::metadata::detail
