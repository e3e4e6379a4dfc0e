// Common engine helpers and the plain pread/pwrite engine (a small worker pool, or inline).

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include <nixl/status.hpp>

#include "engine_of.hpp"
#include "queue_engine.hpp"

namespace nixl::posix::detail {

op_result apply_result(io_op& op, bool write, long res) noexcept {
  if (res < 0) {
    int e = static_cast<int>(-res);
    if (e == EINTR || e == EAGAIN) return {op_result::again, 0};
    return {op_result::failed, e};
  }
  if (res == 0 && op.done < op.len) return {op_result::failed, write ? EIO : eof_error};
  op.done += static_cast<std::size_t>(res);
  if (op.done >= op.len) return {op_result::finished, 0};
  if (!write) {
    // A short read is either the end of the file or an interrupted/split transfer. Only the first
    // is an error; ask the file instead of resubmitting an O_DIRECT tail that cannot be aligned.
    struct stat st {};
    if (::fstat(op.fd, &st) == 0 && S_ISREG(st.st_mode) &&
        op.offset + op.done >= static_cast<std::uint64_t>(st.st_size))
      return {op_result::failed, eof_error};
  }
  return {op_result::again, 0};
}

int run_sync(io_op& op, bool write) noexcept {
  for (;;) {
    std::byte* p = op.buf + op.done;
    std::size_t n = op.len - op.done;
    auto off = static_cast<off_t>(op.offset + op.done);
    ssize_t r = write ? ::pwrite(op.fd, p, n, off) : ::pread(op.fd, p, n, off);
    auto res = apply_result(op, write, r < 0 ? -static_cast<long>(errno) : static_cast<long>(r));
    if (res.what == op_result::finished) return 0;
    if (res.what == op_result::failed) return res.err;
  }
}

std::string error_text(int err) {
  if (err == eof_error) return "read past end of file";
  if (err == ECANCELED) return "canceled";
  return std::system_category().message(err);
}

template <>
struct engine_of<engine_kind::posix>::state {
  explicit state(const engine_options& o) : threads_(o.threads), waker_(o.waker) {
    workers_.reserve(threads_);
    for (unsigned i = 0; i < threads_; ++i) workers_.emplace_back([this] { work(); });
  }
  ~state() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  state(const state&) = delete;
  state& operator=(const state&) = delete;

  unsigned depth() const noexcept { return threads_ == 0 ? 1 : threads_; }

  nixl::status submit(io_batch& b) noexcept {
    if (threads_ == 0) return run_inline(b);
    if (b.ops.empty()) return b.state.end(nixl::status::success);
    {
      std::lock_guard lk(mu_);
      b.state.start();
      queue_.push(b);
    }
    work_cv_.notify_all();
    return nixl::status::in_progress;
  }

  nixl::status poll(io_batch& b) noexcept { return b.state.result(); }

  void cancel(io_batch& b) noexcept {
    std::unique_lock lk(mu_);
    if (b.state.busy()) {
      fail(queue_, b, ECANCELED, 0);
      idle_cv_.wait(lk, [&] { return b.inflight == 0; });
    }
    b.state.reset();
  }

  nixl::status run_inline(io_batch& b) noexcept {
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      if (int e = run_sync(b.ops[i], b.write); e != 0) {
        b.err = e;
        b.err_op = i;
        return b.state.end(nixl::status::backend);
      }
    }
    b.completed = b.ops.size();
    return b.state.end(nixl::status::success);
  }

  void work() noexcept {
    std::unique_lock lk(mu_);
    for (;;) {
      work_cv_.wait(lk, [&] { return stop_ || queue_.head() != nullptr; });
      if (queue_.head() == nullptr) return;  // stopping and nothing left
      io_op* op = queue_.take();
      io_batch& b = *op->owner;
      bool write = b.write;
      lk.unlock();
      int e = run_sync(*op, write);
      lk.lock();
      --b.inflight;
      if (e != 0)
        fail(queue_, b, e, static_cast<std::size_t>(op - b.ops.data()));
      else if (b.err == 0)
        ++b.completed;
      bool idle = b.inflight == 0;
      settle(b);
      if (idle) idle_cv_.notify_all();
      if (waker_ != nullptr) waker_->notify();
    }
  }

  unsigned threads_;
  nixl::detail::waker* waker_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  batch_queue queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

template class engine_of<engine_kind::posix>;

bool engine_built(engine_kind k) noexcept {
  switch (k) {
    case engine_kind::uring:
#ifdef NIXL_POSIX_HAVE_URING
      return true;
#else
      return false;
#endif
    case engine_kind::aio:
#ifdef NIXL_POSIX_HAVE_AIO
      return true;
#else
      return false;
#endif
    case engine_kind::posix:
      return true;
  }
  return false;
}

/// An engine whose library this build lacks: its constructor says so; nothing else is reached.
struct missing_engine {
  missing_engine(const char* why) { throw nixl::error(status::not_supported, why); }
  nixl::status submit(io_batch&) noexcept { return nixl::status::backend; }
  nixl::status poll(io_batch&) noexcept { return nixl::status::backend; }
  void cancel(io_batch&) noexcept {}
  unsigned depth() const noexcept { return 0; }
};
#ifndef NIXL_POSIX_HAVE_URING
template <>
struct engine_of<engine_kind::uring>::state : missing_engine {
  explicit state(const engine_options&)
      : missing_engine(
            "io_uring: this build has no liburing (install liburing-dev and reconfigure)") {}
};
template class engine_of<engine_kind::uring>;
#endif
#ifndef NIXL_POSIX_HAVE_AIO
template <>
struct engine_of<engine_kind::aio>::state : missing_engine {
  explicit state(const engine_options&)
      : missing_engine("aio: this build has no libaio (install libaio-dev and reconfigure)") {}
};
template class engine_of<engine_kind::aio>;
#endif

engine make_engine(engine_kind k, const engine_options& o) {
  switch (k) {
    case engine_kind::uring:
      return engine(std::in_place_type<uring_engine>, o);
    case engine_kind::aio:
      return engine(std::in_place_type<aio_engine>, o);
    case engine_kind::posix:
      break;
  }
  return engine(std::in_place_type<posix_engine>, o);
}

}  // namespace nixl::posix::detail
