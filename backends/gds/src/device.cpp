// The CUDA runtime calls of the GDS backends (VRAM only), present when the CUDA toolkit was
// found at build time.

#include <nixl/backends/gds/detail/common.hpp>

#if defined(NIXL_GDS_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nixl::gds::detail {

#if defined(NIXL_GDS_HAVE_CUDA)
bool use_device(int device) noexcept {
  if (device < 0) return true;
  if (cudaSetDevice(device) == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}
int current_device() noexcept {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}
bool vram_built() noexcept {
  return true;
}
#else
bool use_device(int device) noexcept {
  return device < 0;
}
int current_device() noexcept {
  return -1;
}
bool vram_built() noexcept {
  return false;
}
#endif

}  // namespace nixl::gds::detail
