// Linux AIO engine (libaio): one context per backend, `depth` control blocks in flight.

#include <libaio.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nixl/log.hpp>

#include "queue_engine.hpp"

namespace nixl::posix::detail {
namespace {

class aio_engine final : public queue_engine {
 public:
  explicit aio_engine(const engine_options& o)
      : queue_engine(std::clamp(o.queue_depth, 1u, 4096u)), iocbs_(depth_), events_(depth_) {
    // libaio returns -errno instead of setting errno.
    if (int r = io_setup(static_cast<int>(depth_), &ctx_); r < 0)
      throw std::system_error(
          -r, std::generic_category(),
          fmt::format("io_setup(nr_events={}) (see /proc/sys/fs/aio-max-nr)", depth_));
    free_.reserve(depth_);
    ready_.reserve(depth_);
    for (auto& cb : iocbs_) free_.push_back(&cb);
  }
  ~aio_engine() override {
    {
      std::lock_guard lk(mu_);
      while (kernel_inflight_ != 0) progress_locked(true);
    }
    io_destroy(ctx_);
  }

  engine_kind kind() const noexcept override { return engine_kind::aio; }

 private:
  void progress_locked(bool wait) noexcept override {
    for (;;) {
      unsigned reaped = reap(wait);
      wait = false;
      unsigned queued = fill();
      submit_ready();
      if (reaped == 0 && queued == 0) return;
    }
  }

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

  void submit_ready() noexcept {
    while (!ready_.empty()) {
      int r = io_submit(ctx_, static_cast<long>(ready_.size()), ready_.data());
      if (r > 0) {
        ready_.erase(ready_.begin(), ready_.begin() + r);
        continue;
      }
      if (r == 0 || r == -EAGAIN || r == -EINTR) return;  // try again on the next progress call
      // The first control block was refused (bad fd, bad alignment...): complete it with the error.
      iocb* cb = ready_.front();
      ready_.erase(ready_.begin());
      free_.push_back(cb);
      complete(*static_cast<io_op*>(cb->data), r);
    }
  }

  io_context_t ctx_{};
  std::vector<iocb> iocbs_;
  std::vector<io_event> events_;
  std::vector<iocb*> free_;   // control blocks not in use
  std::vector<iocb*> ready_;  // prepared, not yet accepted by io_submit
};

}  // namespace

std::unique_ptr<engine> make_aio_engine(const engine_options& o) {
  return std::make_unique<aio_engine>(o);
}

}  // namespace nixl::posix::detail
