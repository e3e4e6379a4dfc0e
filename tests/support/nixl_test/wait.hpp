#pragma once
// Waits in tests: every one is a deadline in time, never a count of iterations, so a test means
// the same on a busy 2-core machine as on an idle one.

#include <chrono>
#include <thread>

#include <nixl/status.hpp>

namespace nixl::test {

using namespace std::chrono_literals;

/// The default limit of a wait that should end at once on an idle machine.
inline constexpr std::chrono::milliseconds default_limit = std::chrono::seconds(30);

/// Calls `pred()` until it returns true or `limit` has passed; returns its last answer.
/// Yields between calls (a progress thread may need the core).
template <class Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds limit = default_limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::yield();
  }
}

/// Calls `poll()` (returning nixl::status) until it returns something other than in_progress,
/// or `limit` has passed; returns the last status.
template <class Poll>
nixl::status wait_done(Poll&& poll, std::chrono::milliseconds limit = default_limit) {
  nixl::status s = poll();
  wait_until(
      [&] {
        if (s != nixl::status::in_progress) return true;
        s = poll();
        return s != nixl::status::in_progress;
      },
      limit);
  return s;
}

/// Polls request `r` (anything with a status()) until it leaves in_progress or `limit` passed.
template <class R>
nixl::status wait(R& r, std::chrono::milliseconds limit = default_limit) {
  return wait_done([&] { return r.status(); }, limit);
}

}  // namespace nixl::test
