#pragma once
/// `nixl::cuda::config`: the CUDA backend's settings and their parameter names.
/// The definitions live in <nixl/backends/cuda/detail/config.hpp> so that the backend's detail/ can
/// use them without including a header above its own folder.

#include <nixl/backends/cuda/detail/config.hpp>  // IWYU pragma: export
