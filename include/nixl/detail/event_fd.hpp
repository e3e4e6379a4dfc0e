#pragma once
/// `event_fd`: an owned eventfd (non-blocking, close-on-exec) used as a wake-up counter: one
/// side `signal()`s, the side that polls it `drain()`s. The agent's waker and the progress
/// threads of UCX, LIBFABRIC and the metadata listener share it.

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <nixl/detail/unique_fd.hpp>

namespace nixl::detail {

class event_fd {
 public:
  /// Empty (false) until `open()` succeeded.
  event_fd() noexcept = default;
  /// Makes the eventfd; false (errno says why) when none could be made.
  bool open() noexcept {
    fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    return static_cast<bool>(fd_);
  }
  void reset() noexcept { fd_.reset(); }
  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }

  /// Adds one to the counter (the fd turns readable); nothing on an empty one.
  void signal() const noexcept {
    if (!fd_) return;
    const std::uint64_t one = 1;
    ssize_t r;
    do r = ::write(fd_.get(), &one, sizeof(one));
    while (r < 0 && errno == EINTR);
  }
  /// Empties the counter (a non-blocking read: nothing to read is fine).
  void drain() const noexcept {
    if (!fd_) return;
    std::uint64_t v;
    ssize_t r;
    do r = ::read(fd_.get(), &v, sizeof(v));
    while (r < 0 && errno == EINTR);
  }

 private:
  unique_fd fd_;
};

}  // namespace nixl::detail
