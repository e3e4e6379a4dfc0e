#pragma once
/// A small number for each live thread of the process: the lowest one no other live thread
/// holds, taken on first use and given back when the thread exits.
///
/// What it is for: spreading threads over per-thread resources (the UCX backend's workers with
/// `num_threads`, the reader slots of the `rw` agent lock) by `thread_index() % n`. A counter
/// that only grows would do that well only for threads that live as long as the process: a
/// program (or a benchmark) that starts new threads for each phase would see its live threads
/// land on the same resource whenever their numbers happen to agree modulo n. Reusing the
/// numbers of exited threads keeps k threads alive at once on k different indices.

#include <atomic>
#include <cstdint>

namespace nixl::detail {

class thread_indices {
 public:
  /// Indices below this are reused; beyond it (more live threads than that) numbers are
  /// handed out from a counter and not reused.
  static constexpr std::uint32_t reusable = 1024;

  static std::uint32_t take() noexcept {
    auto& used = table();
    for (std::uint32_t i = 0; i < reusable; ++i) {
      bool expected = false;
      if (!used[i].load(std::memory_order_relaxed) &&
          used[i].compare_exchange_strong(expected, true, std::memory_order_acq_rel))
        return i;
    }
    static std::atomic<std::uint32_t> overflow{reusable};
    return overflow.fetch_add(1, std::memory_order_relaxed);
  }

  static void give(std::uint32_t i) noexcept {
    if (i < reusable) table()[i].store(false, std::memory_order_release);
  }

 private:
  // A plain static array: constant-initialized, so it outlives every thread_local holder,
  // including those of threads that exit while the process is being torn down.
  static std::atomic<bool> (&table() noexcept)[reusable] {
    static std::atomic<bool> used[reusable] = {};
    return used;
  }
};

/// The calling thread's index (see above).
inline std::uint32_t thread_index() noexcept {
  struct holder {
    std::uint32_t index = thread_indices::take();
    holder() = default;
    holder(const holder&) = delete;
    holder& operator=(const holder&) = delete;
    ~holder() { thread_indices::give(index); }
  };
  thread_local const holder mine;
  return mine.index;
}

}  // namespace nixl::detail
