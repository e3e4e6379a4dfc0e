#pragma once
// Shared machinery of the engines: the FIFO of running batches, the retry list of operations
// that came back short, the bookkeeping that ends a batch, and the one progress loop of the
// kernel-queue engines (io_uring and AIO).

#include <cerrno>
#include <mutex>

#include <nixl/backends/posix/detail/engine.hpp>

namespace nixl::posix::detail {

/// Batch bookkeeping common to every engine. Callers hold the engine lock.
class batch_queue {
 public:
  void push(io_batch& b) noexcept {
    b.queued = true;
    b.next_queued = nullptr;
    if (tail_ != nullptr)
      tail_->next_queued = &b;
    else
      head_ = &b;
    tail_ = &b;
  }
  void unlink(io_batch& b) noexcept {
    if (!b.queued) return;
    io_batch* prev = nullptr;
    for (io_batch* it = head_; it != nullptr; prev = it, it = it->next_queued) {
      if (it != &b) continue;
      (prev != nullptr ? prev->next_queued : head_) = it->next_queued;
      if (tail_ == it) tail_ = prev;
      break;
    }
    b.queued = false;
    b.next_queued = nullptr;
  }
  io_batch* head() const noexcept { return head_; }

  /// Takes the next operation of the first queued batch (counted as in flight for it).
  io_op* take() noexcept {
    io_batch* b = head_;
    if (b == nullptr) return nullptr;
    io_op* op = &b->ops[b->next++];
    ++b->inflight;
    if (b->next == b->ops.size()) unlink(*b);
    return op;
  }

 private:
  io_batch* head_ = nullptr;
  io_batch* tail_ = nullptr;
};

/// Ends the batch when nothing of it is in flight any more. Must be the last touch of `b`: once
/// the batch has ended its owner may reuse or destroy it.
inline void settle(io_batch& b) noexcept {
  if (b.err != 0) {
    if (b.inflight == 0) (void)b.state.finish(nixl::status::backend);
  } else if (b.completed == b.ops.size()) {
    (void)b.state.finish(nixl::status::success);
  }
}

/// Records the first error of a batch and stops submitting the rest of it.
inline void fail(batch_queue& q, io_batch& b, int err, std::size_t idx) noexcept {
  if (b.err == 0) {
    b.err = err;
    b.err_op = idx;
  }
  q.unlink(b);
  b.next = b.ops.size();
}

/// Base of the kernel-queue engines (io_uring, AIO): one lock, a FIFO of batches, a retry list
/// and `depth` operations in the kernel at most. `Engine` (CRTP) provides the three steps of
/// the progress loop: `reap(wait)` (completions taken, waiting for one when `wait`), `fill()`
/// (operations prepared for the kernel) and `flush()` (hand them over; false on a hard error),
/// and may hide `begin_pass()` (a post or a check starts progressing).
template <class Engine>
class queue_engine {
 public:
  explicit queue_engine(unsigned depth) : depth_(depth) {}

  nixl::status submit(io_batch& b) noexcept {
    if (b.ops.empty()) return b.state.end(nixl::status::success);
    std::lock_guard lk(mu_);
    b.state.start();
    queue_.push(b);
    progress_locked(false);
    return b.state.result();
  }

  nixl::status poll(io_batch& b) noexcept {
    if (!b.state.busy()) return b.state.result();
    std::lock_guard lk(mu_);
    progress_locked(false);
    return b.state.result();
  }

  void cancel(io_batch& b) noexcept {
    std::lock_guard lk(mu_);
    if (b.state.busy()) {
      fail(queue_, b, ECANCELED, 0);
      while (b.inflight != 0) progress_locked(true);
    }
    b.state.reset();
  }

  unsigned depth() const noexcept { return depth_; }

 protected:
  /// Reaps what completed (waiting for one completion when `wait`), then fills the kernel queue,
  /// until neither step finds work.
  void progress_locked(bool wait) noexcept {
    auto& self = static_cast<Engine&>(*this);
    self.begin_pass();
    for (;;) {
      unsigned reaped = self.reap(wait);
      wait = false;
      unsigned queued = self.fill();
      if (!self.flush()) return;
      if (reaped == 0 && queued == 0) return;
    }
  }

  /// Waits until the kernel holds nothing of ours (before the ring or context goes away).
  void drain() noexcept {
    std::lock_guard lk(mu_);
    while (kernel_inflight_ != 0) progress_locked(true);
  }

  /// Next operation to hand to the kernel: retries first, then queued batches.
  io_op* next_op() noexcept {
    while (retry_ != nullptr) {
      io_op* op = retry_;
      retry_ = op->next;
      op->next = nullptr;
      io_batch& b = *op->owner;
      if (b.err == 0) return op;
      --b.inflight;  // the batch failed meanwhile: drop the rest of this operation
      settle(b);
    }
    return queue_.take();
  }

  /// Applies a kernel result to an operation that has left the kernel.
  void complete(io_op& op, long res) noexcept {
    --kernel_inflight_;
    io_batch& b = *op.owner;
    if (b.err != 0) {
      --b.inflight;
      settle(b);
      return;
    }
    // io_uring cancels the work its workers hold for a thread that exits, and any thread's post
    // or check hands every request's operations to the kernel: an operation canceled so, not by
    // this engine (it cancels none), is handed over again, by a thread that lives (bounded: a
    // thread that exits itself would see it canceled again).
    if (res == -ECANCELED && op.requeued < max_requeues) {
      ++op.requeued;
      res = -EAGAIN;
    }
    auto r = apply_result(op, b.write, res);
    if (r.what == op_result::again) {
      op.next = retry_;
      retry_ = &op;
      return;
    }
    --b.inflight;
    if (r.what == op_result::failed)
      fail(queue_, b, r.err, static_cast<std::size_t>(&op - b.ops.data()));
    else
      ++b.completed;
    settle(b);
  }

  bool has_work() const noexcept { return retry_ != nullptr || queue_.head() != nullptr; }
  void begin_pass() noexcept {}

  static constexpr std::uint8_t max_requeues = 16;

  std::mutex mu_;
  batch_queue queue_;
  io_op* retry_ = nullptr;
  unsigned depth_;
  unsigned kernel_inflight_ = 0;
};

}  // namespace nixl::posix::detail
