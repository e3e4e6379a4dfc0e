#pragma once
/// The I/O engines of the POSIX backend: io_uring, Linux AIO and plain pread/pwrite, one class
/// each, chosen at run time as a `std::variant` (`engine`), not behind a virtual base. A request
/// owns an `io_batch` (its resolved operations); an engine is shared by all requests of one
/// backend and moves the operations of any number of batches through a bounded queue. Each
/// engine keeps its library state (ring, AIO context, workers) in its source file.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <nixl/detail/completion.hpp>
#include <nixl/detail/enum_names.hpp>
#include <nixl/detail/recycled.hpp>
#include <nixl/detail/status.hpp>
#include <nixl/detail/waker.hpp>

namespace nixl::posix::detail {

/// Which engine moves the bytes.
enum class engine_kind : std::uint8_t { uring = 0, aio = 1, posix = 2 };

/// NIXL-style name of an engine ("URING", "AIO", "POSIX").
constexpr std::string_view to_string(engine_kind k) noexcept {
  constexpr auto names = nixl::detail::make_enum_names<engine_kind>({"URING", "AIO", "POSIX"}, "?");
  return names(k);
}

struct io_batch;

/// One pread/pwrite of `len` bytes between `buf` and `fd` at `offset`. `done` counts the bytes
/// already moved, so a short read or write is resubmitted for the rest.
struct io_op {
  std::byte* buf = nullptr;
  std::uint64_t offset = 0;
  std::size_t len = 0;
  std::size_t done = 0;
  int fd = -1;
  bool direct = false;        // the file was opened with O_DIRECT
  std::uint8_t requeued = 0;  // times the kernel canceled it and it was handed over again
  io_batch* owner = nullptr;  // set when the batch is submitted
  io_op* next = nullptr;      // engine-internal retry list
};

/// Error code for a read that reached the end of the file before `len` bytes.
inline constexpr int eof_error = -1;

/// Everything a request needs on the hot path: its operations and their progress. Fields below
/// `ops`/`write` belong to the engine while the batch is running; `state` (busy while running,
/// then done with `success` or `backend`) is readable without the engine lock.
struct io_batch {
  nixl::detail::recycled_vector<io_op> ops;
  bool write = false;

  std::size_t next = 0;      // next operation to submit
  std::size_t inflight = 0;  // operations in the kernel or in a worker
  std::size_t completed = 0;
  int err = 0;             // first error: errno, or eof_error
  std::size_t err_op = 0;  // index of the operation that failed
  bool queued = false;     // linked in the engine's queue
  io_batch* next_queued = nullptr;
  nixl::detail::completion state;

  io_batch() = default;
  // Moves are only legal while the batch is not running (the contract of a request).
  io_batch(io_batch&& o) noexcept : ops(std::move(o.ops)), write(o.write), state(o.state) {}
  io_batch& operator=(io_batch&& o) noexcept {
    ops = std::move(o.ops);
    write = o.write;
    state = o.state;
    return *this;
  }

  /// Resets the progress fields before a (re)submission.
  void reset() noexcept {
    next = inflight = completed = 0;
    err = 0;
    err_op = 0;
    queued = false;
    next_queued = nullptr;
    for (auto& op : ops) {
      op.done = 0;
      op.requeued = 0;
      op.owner = this;
      op.next = nullptr;
    }
  }
  bool finished() const noexcept { return state.ended(); }
};

/// Engine settings.
struct engine_options {
  unsigned queue_depth = 256;  // operations in flight per engine (uring, aio)
  unsigned threads = 4;        // worker threads of the posix engine; 0 = inline in submit
  /// The agent's waker: signalled by io_uring (a registered eventfd) and by the posix engine's
  /// workers when an operation ends, so that request::wait sleeps between its re-checks.
  nixl::detail::waker* waker = nullptr;
};

// The engines share one surface. `submit`, `poll` and `cancel` never throw and never allocate;
// they return the batch's status (`state.result()`) after doing what work is ready: `submit(b)`
// starts a batch whose `reset()` has been called (empty batches are done at once); `poll(b)` makes
// progress (reaps completions, submits queued operations); `cancel(b)` stops submitting the batch's
// operations and waits for those already in flight, after which the batch is idle and its buffers
// are free; `depth()` is the queue depth in use. Constructors throw `std::system_error` (naming the
// failing call) when the engine cannot run here (no kernel support, seccomp, limits, or not in
// this build).

/// Engine `K`: the surface above, over state kept in src/engine_<k>.cpp (where `state` is
/// specialized and this class instantiated).
template <engine_kind K>
class engine_of {
 public:
  static constexpr engine_kind kind = K;
  explicit engine_of(const engine_options& o);
  engine_of(engine_of&&) noexcept;
  engine_of& operator=(engine_of&&) noexcept;
  ~engine_of();
  nixl::status submit(io_batch& b) noexcept;
  nixl::status poll(io_batch& b) noexcept;
  void cancel(io_batch& b) noexcept;
  unsigned depth() const noexcept;

  struct state;

 private:
  std::unique_ptr<state> s_;
};

/// io_uring (liburing): one ring, `depth` operations in flight.
using uring_engine = engine_of<engine_kind::uring>;
/// Linux AIO (libaio): one context, `depth` control blocks in flight.
using aio_engine = engine_of<engine_kind::aio>;
/// pread/pwrite on a small worker pool, or inline in `submit` with 0 threads.
using posix_engine = engine_of<engine_kind::posix>;

/// The engine of one backend, chosen at run time.
using engine = std::variant<uring_engine, aio_engine, posix_engine>;

/// Starts engine `k`; throws `std::system_error` when it cannot run here.
engine make_engine(engine_kind k, const engine_options& o);

/// Which engine `e` is.
inline engine_kind kind_of(const engine& e) noexcept {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kind; }, e);
}

/// True when this build has the engine (liburing / libaio found at configure time).
bool engine_built(engine_kind) noexcept;

/// Moves one operation to completion with pread/pwrite in the calling thread, retrying EINTR and
/// short transfers. Returns 0, an errno value, or `eof_error`.
int run_sync(io_op& op, bool write) noexcept;

/// What one kernel result means for an operation.
struct op_result {
  enum : std::uint8_t { finished, again, failed } what;
  int err;
};

/// Shared completion logic: applies result `res` (bytes moved or -errno) to `op`. EINTR, EAGAIN
/// and short transfers ask for a resubmission of the remaining bytes; a read that reaches the end
/// of the file fails with `eof_error`.
op_result apply_result(io_op& op, bool write, long res) noexcept;

/// Text of a batch error ("Bad file descriptor", "read past end of file").
std::string error_text(int err);

}  // namespace nixl::posix::detail
