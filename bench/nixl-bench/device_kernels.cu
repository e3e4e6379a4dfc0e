// --use_device_api's kernels: puts through memory views (nixl/device.cuh), one per thread or per
// warp, and a plain copy kernel of the same launch shape (the baseline).

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include <nixl/device.cuh>

#include "device_kernels.hpp"

namespace nixl_bench::device {
namespace {

namespace nd = nixl::device;

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// The first put result that was not ok (0: none).
__device__ int put_error;

/// Put `i` (one per thread at THREAD level, per warp at WARP level) moves entry i of the local
/// view to entry i of the remote view.
template <nd::level L>
__global__ void put_kernel(nd::local_view l, nd::remote_view r, std::size_t batch,
                           std::size_t block) {
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t i = L == nd::level::warp ? tid / 32 : tid;
  if (i >= batch) return;  // a whole warp at WARP level: its lanes share i
  const nd::result res = nd::put<L>(l, i, 0, r, i, 0, block);
  if (res != nd::result::ok && (L == nd::level::thread || threadIdx.x % 32 == 0))
    atomicCAS(&put_error, 0, static_cast<int>(res));
}

template <class T>
__device__ void copy_as(char* d, const char* s, std::size_t n, unsigned rank, unsigned width) {
  const std::size_t k = n / sizeof(T);
  for (std::size_t j = rank; j < k; j += width)
    reinterpret_cast<T*>(d)[j] = reinterpret_cast<const T*>(s)[j];
  for (std::size_t j = k * sizeof(T) + rank; j < n; j += width) d[j] = s[j];
}

/// The same shape without views: block i from src + i x stride to dst + i x stride.
template <nd::level L>
__global__ void copy_kernel(const char* src, char* dst, std::size_t batch, std::size_t block,
                            std::size_t stride) {
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t i = L == nd::level::warp ? tid / 32 : tid;
  if (i >= batch) return;
  const unsigned rank = L == nd::level::warp ? threadIdx.x % 32 : 0;
  const unsigned width = L == nd::level::warp ? 32 : 1;
  const char* s = src + i * stride;
  char* d = dst + i * stride;
  if (((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 15u) == 0)
    copy_as<int4>(d, s, block, rank, width);
  else
    copy_as<char>(d, s, block, rank, width);
}

/// Blocks of `threads` threads for `batch` puts, one per thread or per warp.
unsigned grid_of(std::size_t batch, int threads) {
  const std::size_t per_block =
      threads > 32 ? static_cast<std::size_t>(threads) / 32 : static_cast<std::size_t>(threads);
  return static_cast<unsigned>((batch + per_block - 1) / per_block);
}

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

}  // namespace

std::string no_gpu(int gpu) {
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess)
    return std::string("no CUDA device: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device visible";
  if (gpu < 0 || gpu >= n)
    return "no CUDA device " + std::to_string(gpu) + " (" + std::to_string(n) + " visible)";
  if (const cudaError_t e = cudaSetDevice(gpu); e != cudaSuccess)
    return "no CUDA device " + std::to_string(gpu) + ": " + cudaGetErrorString(e);
  if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess)
    return "no CUDA device " + std::to_string(gpu) + ": " + cudaGetErrorString(e);
  return {};
}

runner::runner(int gpu, int peer_gpu) : gpu_(gpu) {
  must(cudaSetDevice(gpu), "cudaSetDevice");
  if (peer_gpu != gpu) {
    int can = 0;
    must(cudaDeviceCanAccessPeer(&can, gpu, peer_gpu), "cudaDeviceCanAccessPeer");
    if (can != 0) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer_gpu, 0);
      if (e != cudaErrorPeerAccessAlreadyEnabled) must(e, "cudaDeviceEnablePeerAccess");
      (void)cudaGetLastError();
    }
  }
  cudaStream_t s = nullptr;
  must(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
}

runner::~runner() {
  if (stream_ != nullptr) cudaStreamDestroy(as_stream(stream_));
  if (scratch_ != nullptr) cudaFree(scratch_);
}

void runner::begin() {
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  // A cudaMemcpy from pageable memory (the data pattern) may return before its DMA ends; the
  // kernels' stream does not wait for the legacy stream.
  must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const int zero = 0;
  must(cudaMemcpyToSymbol(put_error, &zero, sizeof zero), "cudaMemcpyToSymbol");
}

void runner::launch_puts(const void* lv, const void* rv, std::size_t batch, std::size_t block,
                         int threads) {
  const nd::local_view l(lv);
  const nd::remote_view r(rv);
  if (threads > 32)
    put_kernel<nd::level::warp>
        <<<grid_of(batch, threads), threads, 0, as_stream(stream_)>>>(l, r, batch, block);
  else
    put_kernel<nd::level::thread>
        <<<grid_of(batch, threads), threads, 0, as_stream(stream_)>>>(l, r, batch, block);
}

void runner::prepare_copy(std::size_t span, int dst_gpu) {
  if (span > scratch_size_) {
    if (scratch_ != nullptr) cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_size_ = 0;
    must(cudaSetDevice(dst_gpu), "cudaSetDevice");
    must(cudaMalloc(&scratch_, span), "cudaMalloc");
    scratch_size_ = span;
  }
  must(cudaSetDevice(gpu_), "cudaSetDevice");
}

void runner::launch_copy(const void* src, std::size_t batch, std::size_t block, std::size_t stride,
                         int threads) {
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(scratch_);
  if (threads > 32)
    copy_kernel<nd::level::warp>
        <<<grid_of(batch, threads), threads, 0, as_stream(stream_)>>>(s, d, batch, block, stride);
  else
    copy_kernel<nd::level::thread>
        <<<grid_of(batch, threads), threads, 0, as_stream(stream_)>>>(s, d, batch, block, stride);
}

void runner::wait(const char* what) {
  must(cudaGetLastError(), what);
  must(cudaStreamSynchronize(as_stream(stream_)), what);
}

void runner::check_puts() {
  int e = 0;
  must(cudaMemcpyFromSymbol(&e, put_error, sizeof e), "cudaMemcpyFromSymbol");
  if (e != 0)
    throw std::runtime_error("nixl::device::put returned result " + std::to_string(e) +
                             " (nixl::device::result: 1 bad view, 2 released, 3 bad index, 4 "
                             "placeholder, 5 out of range)");
}

}  // namespace nixl_bench::device
