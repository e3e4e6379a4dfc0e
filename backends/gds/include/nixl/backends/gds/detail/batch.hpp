#pragma once
/// The GDS backend's engine state: a pool of cuFile batch handles (set up once, in the shared
/// slot pool; a request's progress is the shared completion record).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <nixl/backends/gds/detail/common.hpp>
#include <nixl/backends/gds/detail/cufile.hpp>
#include <nixl/backends/gds/detail/threads.hpp>
#include <nixl/detail/completion.hpp>

namespace nixl::gds::detail {

/// One cuFile batch handle with room for `batch_limit` entries and their events.
struct batch_slot {
  cufile::CUfileBatchHandle_t handle = nullptr;
  std::vector<cufile::CUfileIOParams_t> params;
  std::vector<cufile::CUfileIOEvents_t> events;
  std::vector<std::uint8_t> seen;  // per entry: its completion was counted
  std::size_t first = 0;           // the request's chunk of entry 0
  unsigned submitted = 0;          // entries filled in (and, once launched, given to cuFile)
  unsigned finished = 0;
  int device = -1;  // VRAM entries: their GPU, made current for the submission
};

/// Submits the filled-in batches of `slots` in order (cuFileBatchIOSubmit). On a refusal the
/// handles not submitted get `submitted` 0 and it returns false.
bool launch(const cufile::library& lib, std::span<batch_slot* const> slots) noexcept;

/// A post's batches, submitted by one of the backend's threads: cuFile's submission can take
/// tens of microseconds (compatibility mode). `ran` says whether the thread got to them (a
/// release may cancel the job first).
struct launch_job : job {
  const cufile::library* lib = nullptr;
  std::vector<batch_slot*> slots;  // capacity reserved at prepare
  bool ran = false;                // written by the thread before the job finishes
};

/// Batch handles set up once; requests take them while in flight and give them back.
class batch_pool {
 public:
  /// Sets up `size` handles of `limit` entries; throws `nixl::error(backend)` when cuFile
  /// refuses.
  batch_pool(const cufile::library& lib, unsigned size, unsigned limit);
  ~batch_pool();
  batch_pool(const batch_pool&) = delete;
  batch_pool& operator=(const batch_pool&) = delete;

  /// Up to `n` free handles, appended to `out` (whose capacity must hold them).
  void take(std::size_t n, std::vector<batch_slot*>& out) noexcept;
  /// Gives a handle back.
  void give(batch_slot* s) noexcept;
  /// Gives back a handle whose entries may still be in cuFile's hands: it is set up again, or
  /// dropped from the pool when that fails.
  void renew(batch_slot* s) noexcept;
  /// Keeps a handle out of the pool for good (cuFile did not give its entries back).
  void lose(batch_slot* s) noexcept;

  unsigned size() const noexcept { return size_; }
  unsigned limit() const noexcept { return limit_; }
  std::size_t free_count() const noexcept { return slots_.free_count(); }

 private:
  const cufile::library* lib_;
  unsigned size_;
  unsigned limit_;
  nixl::detail::slot_pool<batch_slot> slots_;  // all made at construction, none after
};

}  // namespace nixl::gds::detail
