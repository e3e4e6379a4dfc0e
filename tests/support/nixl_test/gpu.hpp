#pragma once
// For tests that need a GPU (built with the CUDA runtime): why they cannot run here.

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

namespace nixl::test {

/// Why the GPU cases cannot run in this process ("no GPU: ..."), or nullopt when a GPU is there.
inline std::optional<std::string> no_gpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no GPU: cudaGetDeviceCount: ") + cudaGetErrorString(e);
  }
  if (n == 0) return std::string("no GPU in this process");
  return std::nullopt;
}

}  // namespace nixl::test
