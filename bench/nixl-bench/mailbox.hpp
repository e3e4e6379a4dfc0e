#pragma once
// Notifications as a small request/reply channel between the initiator and the target process.

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "bench_common.hpp"
#include "options.hpp"

namespace nixl_bench {

using namespace std::chrono_literals;

class mailbox {
 public:
  mailbox(bench_agent& a, std::string peer) : a_(a), peer_(std::move(peer)) {}
  /// Next message from the peer, or nothing after `limit`. With `spin` (a target that
  /// progresses its backend itself), `idle` runs between polls and nothing sleeps; otherwise the
  /// agent's own wait (its event fd) sleeps until a notification arrives, so that a waiting
  /// process takes no core from the transfer it waits for.
  template <class Idle>
  std::optional<std::string> next(std::chrono::milliseconds limit, Idle&& idle, bool spin = false) {
    const auto end = nb::clock::now() + limit;
    for (;;) {
      if (!q_.empty()) {
        auto m = std::move(q_.front());
        q_.pop_front();
        return m;
      }
      nixl::notif_map n;
      if (spin) {
        a_.notifications(n);
      } else {
        const auto left = end - nb::clock::now();
        a_.wait_notifications(n, std::max<nb::clock::duration>(left, nb::clock::duration::zero()));
      }
      if (auto it = n.find(peer_); it != n.end())
        for (auto& m : it->second) q_.push_back(std::move(m));
      if (!q_.empty()) continue;
      if (nb::clock::now() > end) return std::nullopt;
      if (spin) idle();
    }
  }
  std::optional<std::string> next(std::chrono::milliseconds limit) {
    return next(limit, [] {});
  }
  void send(std::string_view msg) { a_.notify(peer_, msg); }

 private:
  bench_agent& a_;
  std::string peer_;
  std::deque<std::string> q_;
};

/// The request to verify `count` blocks of `lay` per thread for `threads` threads.
inline std::string verify_msg(std::uint32_t seed, const nb::layout& lay, std::size_t count,
                              int threads) {
  return fmt::format("verify {} {} {} {} {} {}", seed, lay.block, lay.stride, lay.per_thread, count,
                     threads);
}

}  // namespace nixl_bench
