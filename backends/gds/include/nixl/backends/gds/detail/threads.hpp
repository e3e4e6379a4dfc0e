#pragma once
/// A pool of threads making synchronous cuFile calls (GDS_MT's engine, and GDS's for DRAM
/// chunks), and a request's job (its chunks and progress), shared between the request and the
/// threads so that a release that gives up waiting leaves nothing dangling.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string_view>
#include <thread>
#include <vector>

#include <nixl/backends/gds/detail/common.hpp>

namespace nixl::gds::detail {

/// A request's chunks and their progress; or, with `task`, one piece of other work.
struct job {
  plan work;
  /// Called once by a thread instead of cuFile calls for chunks (the job then has one unit of
  /// work); false fails the job.
  bool (*task)(job&) noexcept = nullptr;
  std::size_t claimed = 0;               // chunks handed to threads (under the pool's lock)
  std::atomic<std::size_t> finished{0};  // chunks done, failed or skipped
  std::atomic<bool> failed{false};
  std::atomic<bool> canceled{false};
  std::atomic<bool> posted{false};
  std::size_t bad_chunk = 0;  // the first failed chunk (written once, before `failed`)
  long long bad_ret = 0;      // what cuFile returned for it
  std::atomic<bool> bad_taken{false};
  job* next_queued = nullptr;  // the pool's queue
  std::shared_ptr<job> keep;   // the queue's reference while queued

  /// What the threads run of it: its chunks, or its task.
  std::size_t units() const noexcept { return task != nullptr ? 1 : work.chunks.size(); }
  /// Posted, with units not finished yet.
  bool busy() const noexcept {
    return posted.load(std::memory_order_acquire) &&
           finished.load(std::memory_order_acquire) < units();
  }
  /// Resets the progress for a post (the job is not busy).
  void start() noexcept {
    claimed = 0;
    finished.store(0, std::memory_order_relaxed);
    failed.store(false, std::memory_order_relaxed);
    canceled.store(false, std::memory_order_relaxed);
    bad_taken.store(false, std::memory_order_relaxed);
    posted.store(true, std::memory_order_release);
  }
};

/// Threads taking chunks off queued jobs, front job first. Idle threads wait on a stack: a
/// posted chunk goes to the thread that went idle last (its cuFile state and caches are warm),
/// and a thread that finishes a chunk takes the next queued one before it goes idle, so that a
/// stream of one-chunk requests runs on one thread rather than on each thread in turn.
class thread_pool {
 public:
  /// `spin`: how long a thread without work looks for more before it sleeps.
  thread_pool(const cufile::library& lib, unsigned threads, std::string_view who,
              std::chrono::microseconds spin = {});
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Queues `j` (whose shared_ptr is `self`) and hands its chunks to idle threads; allocates
  /// nothing.
  void enqueue(const std::shared_ptr<job>& self) noexcept;
  /// Takes `j` off the queue if it is still there; its unclaimed chunks count as finished.
  void withdraw(job& j) noexcept;
  /// Cancels `j`: its chunks not started never run, and the running ones are waited for, at
  /// most `timeout`. True once none runs; false (and a log line) past the timeout, when they
  /// finish on their own.
  bool cancel(job& j, std::chrono::milliseconds timeout) noexcept;
  unsigned threads() const noexcept { return static_cast<unsigned>(workers_.size()); }
  /// Threads waiting for work now (for tests).
  unsigned idle() const noexcept;

 private:
  /// One thread and the chunk handed to it while it waited.
  struct worker {
    std::binary_semaphore wake{0};
    job* j = nullptr;  // nullptr when woken: stop
    std::size_t i = 0;
    std::shared_ptr<job> hold;
    /// Threads handed chunks by the same post, which this one wakes once it is woken: a post
    /// wakes one thread, and each woken thread two more (a tree), so that the poster makes one
    /// futex call however many chunks it hands out.
    worker* kids[2] = {nullptr, nullptr};
    std::thread t;
  };
  /// Claims the next chunk of the front job (under `mu_`; the queue is not empty).
  void claim(job*& j, std::size_t& i, std::shared_ptr<job>& hold) noexcept;
  void run(worker& w, unsigned self) noexcept;
  void execute(job& j, std::size_t i) noexcept;

  /// Waits for `w`'s next hand-off: looks for it for `spin_` first, then sleeps.
  void await_work(worker& w) const noexcept;

  const cufile::library* lib_;
  std::string who_;
  std::chrono::microseconds spin_;
  mutable std::mutex mu_;
  job* head_ = nullptr;
  job* tail_ = nullptr;
  bool stop_ = false;
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<unsigned> idle_;  // a stack: the last one pushed is woken first
};

}  // namespace nixl::gds::detail
