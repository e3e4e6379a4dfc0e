// Linux AIO engine (libaio): one context per backend, `depth` control blocks in flight.

#include <libaio.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <vector>

#include <fmt/format.h>
#include <nixl/backends/posix/check.hpp>

#include "engine_of.hpp"
#include "queue_engine.hpp"

namespace nixl::posix::detail {

template <>
struct engine_of<engine_kind::aio>::state : queue_engine<engine_of<engine_kind::aio>::state> {
  explicit state(const engine_options& o)
      : queue_engine(std::clamp(o.queue_depth, 1u, 4096u)), iocbs_(depth_), events_(depth_) {
    NIXL_POSIX_CHECK_HINT(
        io_setup(static_cast<int>(depth_), &ctx_), status::backend,
        fmt::format("{} events; raise /proc/sys/fs/aio-max-nr, lower kernel_queue_size or "
                    "use_uring / use_posix",
                    depth_));
    free_.reserve(depth_);
    ready_.reserve(depth_);
    for (auto& cb : iocbs_) free_.push_back(&cb);
  }
  ~state() {
    drain();
    NIXL_POSIX_WARN(io_destroy(ctx_));
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  unsigned reap(bool wait) noexcept {
    // Only control blocks accepted by io_submit can complete.
    if (kernel_inflight_ == ready_.size()) return 0;
    timespec zero{0, 0};
    int r = io_getevents(ctx_, wait ? 1 : 0, static_cast<long>(events_.size()), events_.data(),
                         wait ? nullptr : &zero);
    if (r <= 0) return 0;
    for (int i = 0; i < r; ++i) {
      auto* cb = static_cast<iocb*>(events_[i].obj);
      free_.push_back(cb);
      complete(*static_cast<io_op*>(events_[i].data), static_cast<long>(events_[i].res));
    }
    return static_cast<unsigned>(r);
  }

  unsigned fill() noexcept {
    unsigned n = 0;
    while (!free_.empty()) {
      io_op* op = next_op();
      if (op == nullptr) break;
      iocb* cb = free_.back();
      free_.pop_back();
      std::byte* p = op->buf + op->done;
      std::size_t len = std::min<std::size_t>(op->len - op->done, std::size_t{1} << 30);
      auto off = static_cast<long long>(op->offset + op->done);
      if (op->owner->write)
        io_prep_pwrite(cb, op->fd, p, len, off);
      else
        io_prep_pread(cb, op->fd, p, len, off);
      cb->data = op;
      ready_.push_back(cb);
      ++kernel_inflight_;
      ++n;
    }
    return n;
  }

  /// Hands the prepared control blocks to the kernel; what it refuses completes with the error.
  bool flush() noexcept {
    while (!ready_.empty()) {
      int r = io_submit(ctx_, static_cast<long>(ready_.size()), ready_.data());
      if (r > 0) {
        ready_.erase(ready_.begin(), ready_.begin() + r);
        continue;
      }
      if (r == 0 || r == -EAGAIN || r == -EINTR) return true;  // again on the next progress call
      // The first control block was refused (bad fd, bad alignment...): complete it with the error.
      iocb* cb = ready_.front();
      ready_.erase(ready_.begin());
      free_.push_back(cb);
      complete(*static_cast<io_op*>(cb->data), r);
    }
    return true;
  }

  io_context_t ctx_{};
  std::vector<iocb> iocbs_;
  std::vector<io_event> events_;
  std::vector<iocb*> free_;   // control blocks not in use
  std::vector<iocb*> ready_;  // prepared, not yet accepted by io_submit
};

template class engine_of<engine_kind::aio>;

}  // namespace nixl::posix::detail
