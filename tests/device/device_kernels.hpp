// The kernels of the device tests behind plain host functions (device_kernels.cu), so that the
// test cases themselves (device_gpu_test.cpp) are compiled by the host compiler and never pass
// Catch2 through nvcc. A negative result is a CUDA error (-cudaError_t) of the launch or of the
// calls around it; other results are the kernel's own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nixl_device_test {

/// nixl_gpu_level_t's THREAD, WARP and BLOCK.
enum class level : int { thread = 0, warp = 1, block = 2 };
const char* level_name(level l);

/// A nixlMemViewElem: a view, an entry of it and an offset into that entry.
struct elem {
  void* view;
  std::size_t index;
  std::size_t offset;
};

/// NIXL's test kernel on one block of 32 threads: `iters` puts of `size` bytes, each polled to
/// completion with nixlGpuGetXferStatus. 0, or 1000 + the put's status, 2000 + the poll's.
int put(level l, elem src, elem dst, std::size_t size, int iters);

/// nixlGetPtr(view, i) for i < n, into out[0..n).
int get_ptrs(void* view, std::size_t n, void** out);

/// The producer on one block of 32 threads: puts the 4 KiB of `slot` (entry 0 of both views at
/// offset slot x 4 KiB), then nixlAtomicAdd(1) on the u64 counter `slot` of remote entry 1 and
/// waits for it. 0, or 1 (the put), 2 (the add), 3 (its status) failed.
int producer(level l, void* local, void* remote, unsigned slot);

/// The producer for slot 0 beside a consumer kernel on another stream that waits (2 s at most)
/// for the counter at `counter` to reach `want`, then checks the 4 KiB at `data` for `pattern`.
struct counter_result {
  int cuda = 0;       // 0, or -cudaError_t
  int producer = -1;  // as producer()
  int verdict = -1;   // 1: the data was there; 2: it was not; 3: the counter never got there
  unsigned long long counter = 0;
};
counter_result counter_round(level l, void* local, void* remote, void* counter, void* data,
                             std::uint32_t pattern, unsigned long long want);

/// What a kernel gets for misuse (bad indices, a released view, sides swapped, no view, a
/// misaligned counter), through NIXL's API (out[0..8)) and the native one (out[8..13)).
constexpr int misuse_results = 13;
extern const int misuse_expected[misuse_results];
int misuse(void* local, void* remote, void* released, int* out);

/// nixl/device.cuh: put<warp>(local entry 0 at src_off, remote entry 0 at dst_off, n); its result.
int native_put(void* l, std::size_t src_off, void* r, std::size_t dst_off, std::size_t n);

}  // namespace nixl_device_test
