#pragma once
/// `nixl::ucx::config`: the UCX backend's settings, parsed from NIXL's parameter names.
/// The definitions live in <nixl/backends/ucx/detail/config.hpp> so that the backend's detail/
/// can use them without including a header above its own folder.

#include <nixl/backends/ucx/detail/config.hpp>  // IWYU pragma: export
