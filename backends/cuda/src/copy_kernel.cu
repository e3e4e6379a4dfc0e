// The batched copy kernel: one launch moves many descriptors. Each block takes whole items
// (grid-stride over the item list); inside an item the block's threads move 16-byte vectors
// when source and destination share their alignment modulo 16, else 8, 4 or 1 bytes. Each
// thread keeps several loads in flight before its stores, which matters when the loads cross
// NVLink or PCIe.

#include <cstdint>

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda/detail/copy.hpp>

namespace nixl::cuda::detail {
namespace {

constexpr unsigned threads = copy_threads;
constexpr int unroll = 4;

template <class V>
__device__ __forceinline__ void copy_vectors(const char* __restrict__ s, char* __restrict__ d,
                                             std::uint64_t n) {
  const V* vs = reinterpret_cast<const V*>(s);
  V* vd = reinterpret_cast<V*>(d);
  const std::uint64_t nv = n / sizeof(V);
  std::uint64_t i = threadIdx.x;
  for (; i + (unroll - 1) * threads < nv; i += unroll * threads) {
    V r[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) r[u] = vs[i + u * threads];
#pragma unroll
    for (int u = 0; u < unroll; ++u) vd[i + u * threads] = r[u];
  }
  for (; i < nv; i += threads) vd[i] = vs[i];
  const std::uint64_t done = nv * sizeof(V);
  if (threadIdx.x < n - done) d[done + threadIdx.x] = s[done + threadIdx.x];
}

template <class V>
__device__ __forceinline__ void copy_aligned(const char* s, char* d, std::uint64_t n) {
  constexpr std::uint64_t a = sizeof(V);
  std::uint64_t head = (a - (reinterpret_cast<std::uintptr_t>(s) & (a - 1))) & (a - 1);
  if (head > n) head = n;
  if (threadIdx.x < head) d[threadIdx.x] = s[threadIdx.x];
  copy_vectors<V>(s + head, d + head, n - head);
}

__device__ __forceinline__ void copy_one(const char* s, char* d, std::uint64_t n) {
  const auto mis = reinterpret_cast<std::uintptr_t>(s) ^ reinterpret_cast<std::uintptr_t>(d);
  if ((mis & 15) == 0)
    copy_aligned<uint4>(s, d, n);
  else if ((mis & 7) == 0)
    copy_aligned<uint2>(s, d, n);
  else if ((mis & 3) == 0)
    copy_aligned<unsigned>(s, d, n);
  else
    copy_vectors<unsigned char>(s, d, n);
}

__global__ void __launch_bounds__(threads)
    batch_copy(const copy_item* __restrict__ items, std::uint32_t count) {
  for (std::uint32_t i = blockIdx.x; i < count; i += gridDim.x) {
    const copy_item it = items[i];
    copy_one(reinterpret_cast<const char*>(it.src), reinterpret_cast<char*>(it.dst), it.len);
  }
}

}  // namespace

cudaError_t launch_batch_copy(const copy_item* items, std::uint32_t count, std::uint32_t grid,
                              cudaStream_t stream) noexcept {
  if (count == 0) return cudaSuccess;
  if (grid == 0) grid = 1;
  void* args[] = {&items, &count};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&batch_copy), dim3(grid), dim3(threads),
                          args, 0, stream);
}

}  // namespace nixl::cuda::detail
