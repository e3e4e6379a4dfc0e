#pragma once
/// Process-wide facts the CUDA backend needs: the GPUs and their identities, allocation ranges
/// (through the driver entry point that the runtime hands out, so nothing links against
/// libcuda), and the current-device guard. Internal.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda/detail/check.hpp>

namespace nixl::cuda::detail {

using uuid = std::array<std::uint8_t, 16>;

/// One GPU visible to this process.
struct device_info {
  int ordinal = 0;
  uuid id{};
  int sm_count = 0;
  std::string name;
  std::string pci;  // "0000:1b:00.0"
};

/// The GPUs of this process, read once. Empty when there are none; `no_device_reason()` says why.
const std::vector<device_info>& devices() noexcept;
std::string_view no_device_reason() noexcept;

/// Ordinal of the GPU with identity `id` in this process, or -1 when it is not visible here.
int ordinal_of(const uuid& id) noexcept;

/// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
std::string to_string(const uuid& id);

/// Start and size of the allocation that holds `p` (cuMemGetAddressRange). Throws nixl::error.
void allocation_range(const void* p, std::uintptr_t& base, std::size_t& size);

/// Restores the calling thread's current device when it leaves scope.
class device_guard {
 public:
  explicit device_guard(int dev) noexcept {
    if (clear_error(cudaGetDevice(&saved_)) != cudaSuccess || saved_ == dev) saved_ = -1;
    // Set even when it is current already: this also makes the device's primary context
    // current on a thread that has not used the runtime yet.
    ok_ = NIXL_CUDA_WARN(cudaSetDevice(dev));
  }
  ~device_guard() {
    if (saved_ >= 0) (void)NIXL_CUDA_WARN(cudaSetDevice(saved_));
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  int saved_ = -1;
  bool ok_ = true;
};

}  // namespace nixl::cuda::detail
