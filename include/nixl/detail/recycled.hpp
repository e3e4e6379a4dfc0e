#pragma once
/// Large temporaries without page faults. glibc gives a freed block of more than its mmap
/// threshold (128 KiB at first) back to the kernel, and trims the heap above its trim threshold:
/// the next block of that size is mapped afresh, and every page of it costs a fault when first
/// written. A request of 65,536 descriptors builds about 7 MiB of such temporaries; on a virtual
/// machine the faults were 95% of make_request's time (docs/performance.md). `block_cache` keeps
/// a few freed blocks of 64 KiB and more for the next call of about that size, bounded in count
/// and bytes; `recycling_allocator` puts a `std::vector` on it (`recycled_vector`).

#include <array>
#include <cstddef>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace nixl::detail {

class block_cache {
 public:
  static constexpr std::size_t min_block = std::size_t{64} << 10;  ///< smaller: plain new
  static constexpr std::size_t max_blocks = 8;
  static constexpr std::size_t max_bytes = std::size_t{64} << 20;  ///< kept, all blocks together

  /// The process's cache (never destroyed: blocks freed during static destruction still find it;
  /// what it keeps goes with the process).
  static block_cache& get() noexcept {
    static auto* c = new block_cache;  // NOLINT(cppcoreguidelines-owning-memory)
    return *c;
  }

  /// At least `bytes` of storage (aligned as operator new aligns): a kept block of `bytes` to
  /// 4 x `bytes`, else a new one.
  void* take(std::size_t bytes) {
    {
      std::lock_guard lk(mu_);
      std::size_t best = max_blocks;
      for (std::size_t i = 0; i < n_; ++i)
        if (kept_[i].second >= bytes && kept_[i].second / 4 <= bytes &&
            (best == max_blocks || kept_[i].second < kept_[best].second))
          best = i;
      if (best != max_blocks) {
        void* p = kept_[best].first;
        bytes_ -= kept_[best].second;
        kept_[best] = kept_[--n_];
        return p;
      }
    }
    return ::operator new(bytes);
  }

  /// Takes back a block of (at least) `bytes` from `take`: kept when it fits the bounds (in
  /// place of smaller kept blocks if need be), else freed.
  void give(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    if (bytes <= max_bytes) {
      std::lock_guard lk(mu_);
      while (n_ > 0 && (n_ == max_blocks || bytes_ + bytes > max_bytes)) {
        std::size_t small = 0;
        for (std::size_t i = 1; i < n_; ++i)
          if (kept_[i].second < kept_[small].second) small = i;
        if (kept_[small].second >= bytes) break;  // keeps the larger ones
        ::operator delete(kept_[small].first);
        bytes_ -= kept_[small].second;
        kept_[small] = kept_[--n_];
      }
      if (n_ < max_blocks && bytes_ + bytes <= max_bytes) {
        kept_[n_++] = {p, bytes};
        bytes_ += bytes;
        return;
      }
    }
    ::operator delete(p);
  }

  /// Blocks and bytes kept now.
  std::pair<std::size_t, std::size_t> kept() noexcept {
    std::lock_guard lk(mu_);
    return {n_, bytes_};
  }

 private:
  block_cache() = default;
  std::mutex mu_;
  std::array<std::pair<void*, std::size_t>, max_blocks> kept_{};
  std::size_t n_ = 0;
  std::size_t bytes_ = 0;
};

/// An allocator whose blocks of `block_cache::min_block` and more come from, and go back to,
/// the block cache.
template <class T>
struct recycling_allocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  using value_type = T;

  recycling_allocator() noexcept = default;
  template <class U>
  recycling_allocator(const recycling_allocator<U>&) noexcept {
  }  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < block_cache::min_block) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(block_cache::get().take(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < block_cache::min_block)
      ::operator delete(p);
    else
      block_cache::get().give(p, bytes);
  }
  template <class U>
  bool operator==(const recycling_allocator<U>&) const noexcept {
    return true;
  }
};

/// A vector whose large buffers come from the block cache: a request's per-descriptor arrays
/// (its operations, chunks, indices), built afresh for every request of about the same size.
template <class T>
using recycled_vector = std::vector<T, recycling_allocator<T>>;

}  // namespace nixl::detail
