#pragma once
/// `nixl::cuda::config`: the CUDA backend's settings and their parameter names.

#include <cstddef>

#include <nixl/memory.hpp>

namespace nixl::cuda {

/// Parameters (all optional; values are strings, parsed with nixl::detail::parse_bool and
/// parse_number, so the same words as every backend):
/// - `streams_per_gpu` (4, 1 to 64): streams per GPU that requests take in turn.
/// - `kernel_max_bytes` (1 MiB, measured: docs/cuda.md): descriptors of at most this size go
///   to the batch kernel; larger ones to the copy engines. 0 disables the kernel.
/// - `kernel_min_count` (3): fewer small descriptors than this in a request use the copy
///   engines as well (one copy call costs about one launch).
/// - `pin_dram` (true): pin pageable DRAM at registration with cudaHostRegister.
struct config {
  unsigned streams_per_gpu = 4;
  std::size_t kernel_max_bytes = 1024 * 1024;
  std::size_t kernel_min_count = 3;
  bool pin_dram = true;

  /// Throws `nixl::error(invalid_param)` naming a bad value; unknown names are logged and
  /// ignored.
  static config from_params(const nixl::params& p);
  nixl::params to_params() const;
};

}  // namespace nixl::cuda
