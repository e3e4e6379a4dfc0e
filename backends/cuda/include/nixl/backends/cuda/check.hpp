#pragma once
/// Checked calls into the CUDA runtime: NIXL_CUDA_CHECK, NIXL_CUDA_CHECK_HINT, NIXL_CUDA_WARN.
/// The definitions live in <nixl/backends/cuda/detail/check.hpp> so that the backend's detail/ can
/// use them without including a header above its own folder.

#include <nixl/backends/cuda/detail/check.hpp>  // IWYU pragma: export
