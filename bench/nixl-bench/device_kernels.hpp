#pragma once
// The GPU side of --use_device_api (device_kernels.cu): the put kernel (puts through memory
// views, nixl/device.cuh), the copy kernel of the same shape and their stream, so that the rest
// of nixl-bench (C++20) includes no CUDA header.

#include <cstddef>
#include <string>

namespace nixl_bench::device {

/// Why GPU `gpu` cannot run the kernels ("no CUDA device: ..."); empty when it can. Creates the
/// GPU's context when it can, so that backends made afterwards see a GPU in this process.
std::string no_gpu(int gpu);

/// The kernels' stream on one GPU, and the copy kernel's destination. Setup throws with the CUDA
/// call and its error.
class runner {
 public:
  /// Kernels run on `gpu`; with `peer_gpu` another GPU, it enables access to that GPU's memory.
  runner(int gpu, int peer_gpu);
  ~runner();
  runner(const runner&) = delete;
  runner& operator=(const runner&) = delete;

  /// Makes `gpu` current, waits for what it has queued (the data pattern's copies) and clears
  /// the put kernel's error word (before each point).
  void begin();
  /// Enqueues one kernel of `batch` puts of `block` bytes, put i from entry i of the local view
  /// to entry i of the remote view, in CUDA blocks of `threads` threads: one put per thread
  /// (`threads` <= 32, nixl::device::level::thread) or per warp (level::warp).
  void launch_puts(const void* local_view, const void* remote_view, std::size_t batch,
                   std::size_t block, int threads);
  /// The copy kernel's destination: VRAM of `dst_gpu` of at least `span` bytes, this runner's own
  /// (made current again after allocating).
  void prepare_copy(std::size_t span, int dst_gpu);
  /// Enqueues the plain copy kernel of the same shape: block i from `src` + i x `stride` to the
  /// copy's destination at the same offset.
  void launch_copy(const void* src, std::size_t batch, std::size_t block, std::size_t stride,
                   int threads);
  /// Waits for the stream; throws with the CUDA error.
  void wait(const char* what);
  /// Throws with the first result of a put that was not ok since begin().
  void check_puts();

 private:
  int gpu_;
  void* stream_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
};

}  // namespace nixl_bench::device
