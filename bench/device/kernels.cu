// nixl_device_bench's kernels: puts through memory views (nixl/device.cuh) against a plain copy
// kernel of the same launch shape and cudaMemcpyAsync, timed with cudaEvents.

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <nixl/device.cuh>

#include "kernels.hpp"

namespace device_bench {
namespace {

namespace nd = nixl::device;
constexpr int block_threads = 512;
double min_ms_ = 200;

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "nixl_device_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

/// The stream and events every measurement uses.
struct timing {
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  timing() {
    must(cudaSetDevice(0), "cudaSetDevice");
    must(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    must(cudaEventCreate(&a), "cudaEventCreate");
    must(cudaEventCreate(&b), "cudaEventCreate");
  }
};
timing& tm() {
  static timing t;
  return t;
}

/// Microseconds per call of `launch` (which enqueues on tm().s), by cudaEvents around
/// back-to-back calls, repeated until the run lasts min_ms.
template <class F>
double event_us(F&& launch, const char* what) {
  timing& t = tm();
  launch();  // warm-up (and the module's lazy load)
  must(cudaGetLastError(), what);
  must(cudaStreamSynchronize(t.s), what);
  long reps = 1;
  for (;;) {
    must(cudaEventRecord(t.a, t.s), "cudaEventRecord");
    for (long i = 0; i < reps; ++i) launch();
    must(cudaGetLastError(), what);
    must(cudaEventRecord(t.b, t.s), "cudaEventRecord");
    must(cudaEventSynchronize(t.b), what);
    float ms = 0;
    must(cudaEventElapsedTime(&ms, t.a, t.b), "cudaEventElapsedTime");
    if (ms >= min_ms_ || reps >= (1L << 26)) return 1000.0 * ms / static_cast<double>(reps);
    reps = ms < 1 ? reps * 16
                  : std::max(reps * 2,
                             static_cast<long>(static_cast<double>(reps) * 1.2 * min_ms_ / ms));
  }
}

__device__ int put_error;

__global__ void put_slices(nd::local_view l, nd::remote_view r, std::size_t n, std::size_t slice) {
  const std::size_t off = blockIdx.x * slice;
  if (off >= n) return;
  const nd::result res = nd::put<nd::level::block>(l, 0, off, r, 0, off, min(slice, n - off));
  if (threadIdx.x == 0 && res != nd::result::ok) atomicCAS(&put_error, 0, static_cast<int>(res));
}

__global__ void copy_slices(const uint4* src, uint4* dst, std::size_t n, std::size_t slice) {
  const std::size_t off = blockIdx.x * slice;
  if (off >= n) return;
  const std::size_t words = min(slice, n - off) / sizeof(uint4);
  const uint4* s = src + off / sizeof(uint4);
  uint4* d = dst + off / sizeof(uint4);
  for (std::size_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
}

__global__ void warp_puts(nd::local_view l, nd::remote_view r, int count, std::size_t len) {
  const int w = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32);
  if (w >= count) return;
  const std::size_t off = static_cast<std::size_t>(w) * len;
  const nd::result res = nd::put<nd::level::warp>(l, 0, off, r, 0, off, len);
  if (threadIdx.x % 32 == 0 && res != nd::result::ok)
    atomicCAS(&put_error, 0, static_cast<int>(res));
}

/// A slice per block, a multiple of 16 bytes.
std::size_t slice_of(std::size_t n, int blocks) {
  const std::size_t s =
      (n + static_cast<std::size_t>(blocks) - 1) / static_cast<std::size_t>(blocks);
  return (s + 15) / 16 * 16;
}

void check_put_error(const char* what) {
  int e = 0;
  must(cudaMemcpyFromSymbol(&e, put_error, sizeof e), "cudaMemcpyFromSymbol");
  if (e != 0) {
    std::fprintf(stderr, "nixl_device_bench: %s: nixl::device::put returned result %d\n", what, e);
    std::exit(2);
  }
}

void launch_warp_puts(void* l, void* r, int count, std::size_t len) {
  constexpr int warps_per_block = 8;
  warp_puts<<<(count + warps_per_block - 1) / warps_per_block, 32 * warps_per_block, 0, tm().s>>>(
      nd::local_view(l), nd::remote_view(r), count, len);
}

}  // namespace

std::string no_gpu() {
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess)
    return std::string("no CUDA GPU: ") + cudaGetErrorString(e);
  return n == 0 ? std::string("no CUDA GPU visible") : std::string();
}

std::string gpu_name() {
  cudaDeviceProp p{};
  must(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  return p.name;
}

int sm_count() {
  int n = 0;
  must(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  return n;
}

void* vram(std::size_t n) {
  void* p = nullptr;
  must(cudaSetDevice(0), "cudaSetDevice");
  must(cudaMalloc(&p, n), "cudaMalloc");
  return p;
}

void vram_free(void* p) {
  cudaFree(p);
}

void fill(void* p, void* q, std::size_t n, unsigned seed) {
  std::vector<unsigned char> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i % 253 + seed);
  must(cudaMemcpy(p, h.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy");
  must(cudaMemset(q, 0, n), "cudaMemset");
  must(cudaDeviceSynchronize(), "cudaMemset");  // the kernels run on a non-blocking stream
}

bool equal(const void* a, const void* b, std::size_t n) {
  std::vector<unsigned char> x(n), y(n);
  must(cudaMemcpy(x.data(), a, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
  must(cudaMemcpy(y.data(), b, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return x == y;
}

void set_min_ms(double ms) {
  min_ms_ = ms;
}
double min_ms() {
  return min_ms_;
}

double put_us(void* l, void* r, std::size_t n, int blocks) {
  const std::size_t slice = slice_of(n, blocks);
  const double us = event_us(
      [&] {
        put_slices<<<blocks, block_threads, 0, tm().s>>>(nd::local_view(l), nd::remote_view(r), n,
                                                         slice);
      },
      "put kernel");
  check_put_error("put kernel");
  return us;
}

void put_once(void* l, void* r, std::size_t n, int blocks) {
  put_slices<<<blocks, block_threads, 0, tm().s>>>(nd::local_view(l), nd::remote_view(r), n,
                                                   slice_of(n, blocks));
  must(cudaGetLastError(), "put kernel");
  must(cudaStreamSynchronize(tm().s), "put kernel");
  check_put_error("put kernel");
}

double copy_us(const void* src, void* dst, std::size_t n, int blocks) {
  const std::size_t slice = slice_of(n, blocks);
  return event_us(
      [&] {
        copy_slices<<<blocks, block_threads, 0, tm().s>>>(static_cast<const uint4*>(src),
                                                          static_cast<uint4*>(dst), n, slice);
      },
      "copy kernel");
}

double memcpy_us(const void* src, void* dst, std::size_t n) {
  return event_us(
      [&] {
        must(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, tm().s), "cudaMemcpyAsync");
      },
      "cudaMemcpyAsync");
}

double small_puts_us(void* l, void* r, int count, std::size_t len) {
  const double us = event_us([&] { launch_warp_puts(l, r, count, len); }, "small puts kernel");
  check_put_error("small puts kernel");
  return us;
}

double small_puts_host_us(void* l, void* r, int count, std::size_t len) {
  using clk = std::chrono::steady_clock;
  std::vector<double> t;
  const auto end = clk::now() + std::chrono::duration<double, std::milli>(min_ms_);
  while (clk::now() < end || t.size() < 10) {
    const auto a = clk::now();
    launch_warp_puts(l, r, count, len);
    must(cudaStreamSynchronize(tm().s), "small puts kernel");
    t.push_back(std::chrono::duration<double, std::micro>(clk::now() - a).count());
  }
  must(cudaGetLastError(), "small puts kernel");
  check_put_error("small puts kernel");
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace device_bench
