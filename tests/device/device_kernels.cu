// The kernels of the device tests and the host functions that launch them (device_kernels.hpp):
// NIXL's nixl_device.cuh and nixl-cpp's nixl/device.cuh, compiled by nvcc without the tests.

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include <nixl/device.cuh>
#include <nixl_device.cuh>

#include "device_kernels.hpp"

static_assert(std::is_trivially_default_constructible_v<nixlGpuXferStatusH> &&
              std::is_trivially_copyable_v<nixlGpuXferStatusH>);
static_assert(std::is_same_v<nixlMemViewH, void*>);
static_assert(static_cast<uint64_t>(nixl_gpu_level_t::BLOCK) == 2 && nixl_gpu_flags::defer == 1);
static_assert(static_cast<int>(nixl_gpu_level_t::WARP) ==
              static_cast<int>(nixl_device_test::level::warp));
#ifndef HAVE_UCX_GPU_DEVICE_API
#error "nixl_device.cuh defines HAVE_UCX_GPU_DEVICE_API"
#endif

namespace nixl_device_test {
namespace {

constexpr size_t kib4 = 4096;

nixlMemViewElem to_nixl(elem e) {
  return {e.view, e.index, e.offset};
}

/// A device int, zeroed, freed at the end of the scope; `failed` holds the first CUDA error.
struct dev_ints {
  explicit dev_ints(int n) : n(n) {
    note(cudaMalloc(&p, n * sizeof(int)));
    if (p != nullptr) note(cudaMemset(p, 0, n * sizeof(int)));
  }
  ~dev_ints() { cudaFree(p); }
  void note(cudaError_t e) {
    if (e != cudaSuccess && failed == 0) failed = -static_cast<int>(e);
  }
  /// Waits for the device and copies the ints to `out`; 0 or -cudaError_t.
  int read(int* out) {
    note(cudaGetLastError());
    note(cudaDeviceSynchronize());
    if (failed == 0) note(cudaMemcpy(out, p, n * sizeof(int), cudaMemcpyDeviceToHost));
    return failed;
  }
  int* p = nullptr;
  int n;
  int failed = 0;
};

/// NIXL's kernel: each thread takes its status slot from a __shared__ array by value, puts
/// `iters` times and polls each put to completion. `err` gets the first failure.
template <nixl_gpu_level_t L>
__global__ void put_kernel(nixlMemViewElem src, nixlMemViewElem dst, size_t size, int iters,
                           int* err) {
  __shared__ nixlGpuXferStatusH slots[32];
  nixlGpuXferStatusH s = slots[threadIdx.x % 32];
  for (int i = 0; i < iters; ++i) {
    nixl_status_t r = nixlPut<L>(src, dst, size, 0, 0, &s);
    if (r != NIXL_IN_PROG) {
      atomicCAS(err, 0, 1000 + static_cast<int>(r));
      return;
    }
    do {
      r = nixlGpuGetXferStatus<L>(s);
    } while (r == NIXL_IN_PROG);
    if (r != NIXL_SUCCESS) {
      atomicCAS(err, 0, 2000 + static_cast<int>(r));
      return;
    }
  }
}

template <nixl_gpu_level_t L>
int put_at(elem src, elem dst, size_t size, int iters) {
  dev_ints err(1);
  if (err.failed != 0) return err.failed;
  put_kernel<L><<<1, 32>>>(to_nixl(src), to_nixl(dst), size, iters, err.p);
  int h = -1;
  const int rc = err.read(&h);
  return rc != 0 ? rc : h;
}

__global__ void get_ptr_kernel(nixlMemViewH mvh, size_t n, void** out) {
  for (size_t i = 0; i < n; ++i) out[i] = nixlGetPtr(mvh, i);
}

/// The sender: puts the 4 KiB of slot `slot` (entry 0, offset slot x 4 KiB on both sides) at
/// level L (THREAD: each thread its 128-byte slice), then counts itself done with
/// nixlAtomicAdd on the receiver's counter `slot` (entry 1, offset slot x 8).
template <nixl_gpu_level_t L>
__global__ void producer_kernel(nixlMemViewH l, nixlMemViewH r, unsigned slot, int* err) {
  size_t off = slot * kib4, size = kib4;
  if constexpr (L == nixl_gpu_level_t::THREAD) {
    size = kib4 / 32;
    off += threadIdx.x * size;
  }
  if (nixlPut<L>({l, 0, off}, {r, 0, off}, size) != NIXL_IN_PROG) atomicCAS(err, 0, 1);
  nixlGpuXferStatusH s;
  if (nixlAtomicAdd<L>(1, {r, 1, slot * sizeof(uint64_t)}, 0, 0, &s) != NIXL_IN_PROG)
    atomicCAS(err, 0, 2);
  if (nixlGpuGetXferStatus<L>(s) != NIXL_SUCCESS) atomicCAS(err, 0, 3);
}

template <nixl_gpu_level_t L>
int producer_at(void* l, void* r, unsigned slot) {
  dev_ints err(1);
  if (err.failed != 0) return err.failed;
  producer_kernel<L><<<1, 32>>>(l, r, slot, err.p);
  int h = -1;
  const int rc = err.read(&h);
  return rc != 0 ? rc : h;
}

/// The receiver: waits (two seconds at most) for the counter to reach `want`, then checks the
/// data. `verdict`: 1 when the data was all there, 2 when it was not, 3 on timeout.
__global__ void consumer_kernel(const volatile unsigned long long* counter, unsigned long long want,
                                const volatile uint32_t* data, uint32_t pattern, int* verdict) {
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*counter < want) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > 2000000000ull) {
      *verdict = 3;
      return;
    }
  }
  __threadfence_system();
  for (size_t i = 0; i < kib4 / 4; ++i)
    if (data[i] != pattern) {
      *verdict = 2;
      return;
    }
  *verdict = 1;
}

template <nixl_gpu_level_t L>
counter_result counter_round_at(void* l, void* r, void* counter, void* data, uint32_t pattern,
                                unsigned long long want) {
  counter_result out;
  dev_ints dev(2);
  dev.note(cudaMemset(data, 0, kib4));
  dev.note(cudaMemset(counter, 0, 256));
  cudaStream_t a = nullptr, b = nullptr;
  dev.note(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  dev.note(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  // Load both kernels now: with CUDA's lazy loading, the producer's first launch would wait for
  // the spinning consumer to end.
  cudaFuncAttributes fa{};
  dev.note(cudaFuncGetAttributes(&fa, consumer_kernel));
  dev.note(cudaFuncGetAttributes(&fa, producer_kernel<L>));
  if (dev.failed == 0) {
    consumer_kernel<<<1, 1, 0, b>>>(static_cast<unsigned long long*>(counter), want,
                                    static_cast<uint32_t*>(data), pattern, dev.p + 1);
    producer_kernel<L><<<1, 32, 0, a>>>(l, r, 0, dev.p);
    int h[2] = {-1, -1};
    if (dev.read(h) == 0) {
      out.producer = h[0];
      out.verdict = h[1];
      dev.note(cudaMemcpy(&out.counter, counter, sizeof out.counter, cudaMemcpyDeviceToHost));
    }
  }
  if (a != nullptr) cudaStreamDestroy(a);
  if (b != nullptr) cudaStreamDestroy(b);
  out.cuda = dev.failed;
  return out;
}

/// Errors a kernel gets instead of faults: codes of NIXL's and of the native API.
__global__ void misuse_kernel(nixlMemViewH l, nixlMemViewH r, nixlMemViewH released, int* out) {
  out[0] = nixlPut({l, 0, 0}, {r, 5, 0}, 16);         // index past the end
  out[1] = nixlPut({l, 0, 0}, {r, 0, kib4 - 8}, 16);  // past the entry's end
  out[2] = nixlPut({l, 0, 0}, {released, 0, 0}, 16);  // released view
  out[3] = nixlAtomicAdd(1, {released, 0, 0});        // released view
  out[4] = nixlGetPtr(released, 0) == nullptr;        // released view
  out[5] = nixlPut({r, 0, 0}, {l, 0, 0}, 16);         // sides swapped
  out[6] = nixlPut({nullptr, 0, 0}, {r, 0, 0}, 16);   // no view
  out[7] = nixlAtomicAdd(1, {r, 0, 4});               // misaligned counter
  using namespace nixl::device;
  out[8] = static_cast<int>(put(local_view(l), 0, 0, remote_view(r), 9, 0, 16));
  out[9] = static_cast<int>(put(local_view(l), 0, kib4, remote_view(r), 0, 0, 1));
  out[10] = static_cast<int>(put(local_view(l), 0, 0, remote_view(released), 0, 0, 1));
  out[11] = static_cast<int>(nixl::device::put<nixl::device::level::thread>(
      local_view(l), 0, 0, remote_view(r), 0, 0, 64));
  out[12] = static_cast<int>(size(remote_view(r)));
}

__global__ void native_put_kernel(nixl::device::local_view l, std::size_t so,
                                  nixl::device::remote_view r, std::size_t doff, std::size_t n,
                                  int* out) {
  const auto res = nixl::device::put<nixl::device::level::warp>(l, 0, so, r, 0, doff, n);
  if (threadIdx.x == 0) *out = static_cast<int>(res);
}

}  // namespace

const char* level_name(level l) {
  return l == level::warp ? "WARP" : l == level::block ? "BLOCK" : "THREAD";
}

int put(level l, elem src, elem dst, size_t size, int iters) {
  switch (l) {
    case level::warp:
      return put_at<nixl_gpu_level_t::WARP>(src, dst, size, iters);
    case level::block:
      return put_at<nixl_gpu_level_t::BLOCK>(src, dst, size, iters);
    default:
      return put_at<nixl_gpu_level_t::THREAD>(src, dst, size, iters);
  }
}

int get_ptrs(void* view, size_t n, void** out) {
  void** d = nullptr;
  cudaError_t e = cudaMalloc(&d, n * sizeof(void*));
  if (e == cudaSuccess) {
    get_ptr_kernel<<<1, 1>>>(view, n, d);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(out, d, n * sizeof(void*), cudaMemcpyDeviceToHost);
    cudaFree(d);
  }
  return -static_cast<int>(e);
}

int producer(level l, void* local, void* remote, unsigned slot) {
  switch (l) {
    case level::warp:
      return producer_at<nixl_gpu_level_t::WARP>(local, remote, slot);
    case level::block:
      return producer_at<nixl_gpu_level_t::BLOCK>(local, remote, slot);
    default:
      return producer_at<nixl_gpu_level_t::THREAD>(local, remote, slot);
  }
}

counter_result counter_round(level l, void* local, void* remote, void* counter, void* data,
                             uint32_t pattern, unsigned long long want) {
  switch (l) {
    case level::warp:
      return counter_round_at<nixl_gpu_level_t::WARP>(local, remote, counter, data, pattern, want);
    case level::block:
      return counter_round_at<nixl_gpu_level_t::BLOCK>(local, remote, counter, data, pattern, want);
    default:
      return counter_round_at<nixl_gpu_level_t::THREAD>(local, remote, counter, data, pattern,
                                                        want);
  }
}

const int misuse_expected[misuse_results] = {NIXL_ERR_BACKEND,
                                             NIXL_ERR_BACKEND,
                                             NIXL_ERR_BACKEND,
                                             NIXL_ERR_BACKEND,
                                             1,
                                             NIXL_ERR_BACKEND,
                                             NIXL_ERR_BACKEND,
                                             NIXL_ERR_BACKEND,
                                             static_cast<int>(nixl::device::result::bad_index),
                                             static_cast<int>(nixl::device::result::out_of_range),
                                             static_cast<int>(nixl::device::result::released),
                                             static_cast<int>(nixl::device::result::ok),
                                             1};

int misuse(void* local, void* remote, void* released, int* out) {
  dev_ints dev(misuse_results);
  if (dev.failed != 0) return dev.failed;
  misuse_kernel<<<1, 1>>>(local, remote, released, dev.p);
  return dev.read(out);
}

int native_put(void* l, std::size_t so, void* r, std::size_t doff, std::size_t n) {
  dev_ints dev(1);
  if (dev.failed != 0) return dev.failed;
  native_put_kernel<<<1, 32>>>(nixl::device::local_view(l), so, nixl::device::remote_view(r), doff,
                               n, dev.p);
  int h = -1;
  const int rc = dev.read(&h);
  return rc != 0 ? rc : h;
}

}  // namespace nixl_device_test
