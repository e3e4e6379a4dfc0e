// io_uring engine (liburing): one ring per backend, `depth` operations in flight.

#include <liburing.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>
#include <nixl/backends/posix/check.hpp>
#include <nixl/log.hpp>

#include "engine_of.hpp"
#include "queue_engine.hpp"

namespace nixl::posix::detail {

template <>
struct engine_of<engine_kind::uring>::state : queue_engine<engine_of<engine_kind::uring>::state> {
  explicit state(const engine_options& o) : queue_engine(std::clamp(o.queue_depth, 1u, 4096u)) {
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = depth_ * 2;
    NIXL_POSIX_CHECK_HINT(io_uring_queue_init_params(depth_, &ring_, &p), status::backend,
                          fmt::format("{} entries; the kernel or a seccomp policy refuses "
                                      "io_uring: use_aio or use_posix",
                                      depth_));
    io_uring_probe* probe = io_uring_get_probe_ring(&ring_);
    bool ok = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_READ) &&
              io_uring_opcode_supported(probe, IORING_OP_WRITE);
    if (probe != nullptr) io_uring_free_probe(probe);
    if (!ok) {
      io_uring_queue_exit(&ring_);
      throw nixl::error(status::not_supported,
                        "io_uring_get_probe_ring: kernel lacks IORING_OP_READ/WRITE (needs 5.6); "
                        "use_aio or use_posix");
    }
    // Completions signal the agent's event fd from the kernel; without it (refused), waits on
    // this backend's requests still end by re-checking at intervals.
    if (o.waker != nullptr && io_uring_register_eventfd(&ring_, o.waker->fd()) < 0)
      log::info("POSIX io_uring: io_uring_register_eventfd refused; waits re-check at intervals");
  }
  ~state() {
    drain();
    io_uring_queue_exit(&ring_);
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  /// Hands the prepared entries to the kernel; false on a hard error.
  bool flush() noexcept {
    if (unsubmitted_ == 0) return true;
    int r = io_uring_submit(&ring_);
    if (r > 0) {
      unsubmitted_ -= std::min<unsigned>(unsubmitted_, static_cast<unsigned>(r));
    } else if (r < 0 && r != -EAGAIN && r != -EBUSY && r != -EINTR) {
      report_posix(-r, "io_uring_submit(&ring_)", __FILE__, __LINE__);
      return false;
    }
    return true;
  }

  unsigned reap(bool wait) noexcept {
    unsigned n = 0;
    if (wait && kernel_inflight_ != 0) {
      if (io_uring_submit_and_wait(&ring_, 1) >= 0) unsubmitted_ = 0;
    }
    io_uring_cqe* cqes[64];
    for (;;) {
      unsigned k = io_uring_peek_batch_cqe(&ring_, cqes, 64);
      if (k == 0) break;
      for (unsigned i = 0; i < k; ++i)
        complete(*static_cast<io_op*>(io_uring_cqe_get_data(cqes[i])), cqes[i]->res);
      io_uring_cq_advance(&ring_, k);
      n += k;
    }
    return n;
  }

  void begin_pass() noexcept { inline_left_ = inline_budget; }

  unsigned fill() noexcept {
    unsigned n = 0;
    while (kernel_inflight_ < depth_) {
      io_op* op = next_op();
      if (op == nullptr) break;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) {  // cannot happen: the ring has at least depth_ entries
        op->next = retry_;
        retry_ = op;
        break;
      }
      std::byte* p = op->buf + op->done;
      auto len = static_cast<unsigned>(std::min<std::size_t>(op->len - op->done, 1u << 30));
      std::uint64_t off = op->offset + op->done;
      if (op->owner->write)
        io_uring_prep_write(sqe, op->fd, p, len, off);
      else
        io_uring_prep_read(sqe, op->fd, p, len, off);
      // A buffered read of cached pages is copied inside io_uring_enter: past the pass's inline
      // budget it goes to the kernel's workers (a small page-cache hit still ends inside the
      // post). O_DIRECT has no copy to wait for; a buffered write is not marked (io_uring
      // hands it to a worker itself, and marking it cost every post of 512 KiB - 64 MiB
      // 15-30 us on the project machine).
      if (!op->direct && !op->owner->write) {
        if (len <= inline_left_)
          inline_left_ -= len;
        else
          io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
      }
      io_uring_sqe_set_data(sqe, op);
      ++kernel_inflight_;
      ++unsubmitted_;
      ++n;
    }
    return n;
  }

  /// Bytes of buffered reads one pass (a post, a check) may leave for the kernel to copy inside
  /// io_uring_enter; the rest go to its workers (IOSQE_ASYNC). Without a bound, a post of a
  /// 64 MiB page-cache read returned once the 64 MiB were copied (6 ms on the project machine);
  /// 256 KiB take about 10 us.
  static constexpr std::size_t inline_budget = std::size_t{256} << 10;

  io_uring ring_{};
  unsigned unsubmitted_ = 0;
  std::size_t inline_left_ = 0;
};

template class engine_of<engine_kind::uring>;

}  // namespace nixl::posix::detail
