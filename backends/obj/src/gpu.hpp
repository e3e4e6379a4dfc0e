// VRAM for the object store backends: the process's CUDA driver (nixl/detail/cuda_driver.hpp:
// dlopen of libcuda.so.1, nothing links against CUDA; one primary context and copy stream per
// device), and a bounded pool of pinned host memory through which GPU bytes go to and from HTTP
// bodies.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace nixl::detail::cu {
struct driver;
}

namespace nixl::obj::detail {

/// The VRAM side of one store. `attach` runs on the callers' threads; `acquire`, `release`,
/// `to_host` and `to_device` on the engine's thread only.
class gpu_stage {
 public:
  /// `pool_bytes`: the pinned pool (`vram_staging_bytes`), allocated on the first `attach`.
  /// `largest_body`: the largest HTTP body a request makes (multipart_threshold, part_size).
  /// `copy_timeout`: the bound of one copy's wait.
  gpu_stage(std::string_view who, std::size_t pool_bytes, std::size_t largest_body,
            std::chrono::milliseconds copy_timeout);
  ~gpu_stage();
  gpu_stage(const gpu_stage&) = delete;
  gpu_stage& operator=(const gpu_stage&) = delete;

  /// Checks that [addr, addr+len) is GPU memory of one device and readies that device's
  /// context, its stream and the pool. Returns the device ordinal. Throws
  /// `nixl::error(not_supported)` when there is no CUDA driver or device,
  /// `nixl::error(invalid_param)` for memory that is not GPU memory, and
  /// `nixl::error(backend)` with the CUDA error string when the driver fails.
  int attach(std::uintptr_t addr, std::size_t len, std::uint64_t dev_hint);

  /// `n` bytes of the pool (rounded up to 4 KiB), or nullptr when it has no room now.
  std::byte* acquire(std::size_t n) noexcept;
  /// Gives back what `acquire(n)` returned.
  void release(std::byte* p, std::size_t n) noexcept;
  /// Keeps what `acquire(n)` returned out of the pool for good (a copy that did not end may
  /// still use it).
  void forget(std::size_t n) noexcept;
  /// Bytes acquired and not yet given back; bytes forgotten.
  std::size_t in_use() const noexcept { return in_use_; }
  std::size_t lost() const noexcept { return lost_; }

  /// GPU -> pinned host and back, on device `dev`'s stream, waiting at most `copy_timeout`.
  /// False with the reason in `err` (the CUDA error string). After a copy that did not end in
  /// time, `poisoned` is true: its host bytes must not be given back to the pool.
  bool to_host(int dev, std::byte* host, const std::byte* gpu, std::size_t n, std::string& err,
               bool& poisoned) noexcept;
  bool to_device(int dev, std::byte* gpu, const std::byte* host, std::size_t n, std::string& err,
                 bool& poisoned) noexcept;

  std::size_t pool_bytes() const noexcept { return pool_bytes_; }

 private:
  bool copy(bool down, int dev, void* dst, const void* src, std::size_t n, std::string& err,
            bool& poisoned) noexcept;

  std::string who_;
  std::size_t pool_bytes_;
  std::size_t largest_;
  std::chrono::milliseconds copy_timeout_;
  nixl::detail::cu::driver* drv_ = nullptr;
  std::mutex mu_;              // pool creation
  std::byte* pool_ = nullptr;  // pinned (cuMemHostAlloc, portable)
  void* pool_ctx_ = nullptr;   // the context it was allocated in
  // Engine thread only: free ranges of the pool, offset -> length.
  std::map<std::size_t, std::size_t> free_;
  std::size_t in_use_ = 0, lost_ = 0;
};

}  // namespace nixl::obj::detail
