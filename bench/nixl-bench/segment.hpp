#pragma once
// Segments: what one side transfers from or into (DRAM, VRAM or a file), and their set-up,
// filling and checking per segment type.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "options.hpp"

namespace nixl_bench {

/// A DRAM buffer, a VRAM buffer or a file, all addressed by offsets from 0.
class segment {
 public:
  /// With `ucx`, DRAM comes from the UCX backend's allocator instead of mmap.
  segment(nixl::mem_kind kind, std::size_t size, const options& o, int gpu, const char* who,
          nixl::ucx::backend* ucx = nullptr);
  segment(const segment&) = delete;
  ~segment();

  nixl::mem_kind kind() const noexcept { return kind_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }
  std::uintptr_t base() const noexcept {
    if (kind_ == nixl::mem_kind::dram) return reinterpret_cast<std::uintptr_t>(host());
    if (kind_ == nixl::mem_kind::vram) return reinterpret_cast<std::uintptr_t>(vram_);
    return 0;
  }
  std::uint64_t dev() const noexcept {
    if (kind_ == nixl::mem_kind::vram) return static_cast<std::uint64_t>(gpu_);
    if (kind_ == nixl::mem_kind::file) return static_cast<std::uint64_t>(fd_);
    return 0;
  }
  /// Registers the segment with `a` (restricted to `opt`'s backends) until destruction.
  void register_with(bench_agent& a, const nixl::backend_options& opt = {});
  std::uint8_t* host() const noexcept {
    if (ucx_mem_.size() != 0) return reinterpret_cast<std::uint8_t*>(ucx_mem_.data());
    return host_.data();
  }
  nixl::reg_dlist registration() const;
  nixl::desc at(std::size_t off, std::size_t len) const noexcept {
    return {base() + off, len, dev()};
  }

  /// Pattern `seed` over the whole segment.
  void fill(std::uint32_t seed);
  /// Offset of the first byte of the written blocks that does not hold pattern `seed`.
  std::optional<std::size_t> verify(const nb::layout& lay, std::size_t count, int threads,
                                    std::uint32_t seed);

 private:
  void put(std::size_t off, const void* src, std::size_t n);
  void get(std::size_t off, void* dst, std::size_t n);

  nixl::mem_kind kind_;
  std::size_t size_;
  nb::host_buffer host_;
  nixl::ucx::memory ucx_mem_;
  std::function<void()> cleanup_;
  void* vram_ = nullptr;
  int gpu_ = 0;
  int fd_ = -1;
  std::string path_;
};

/// The UCX allocator of `a` when DRAM should come from UCX (--ucx_alloc), else null.
nixl::ucx::backend* ucx_allocator(bench_agent& a, const options& o);

}  // namespace nixl_bench
