#pragma once
/// Checked calls into UCX: NIXL_UCX_CHECK, NIXL_UCX_WARN.
/// The definitions live in <nixl/backends/ucx/detail/check.hpp> so that the backend's detail/
/// can use them without including a header above its own folder.

#include <nixl/backends/ucx/detail/check.hpp>  // IWYU pragma: export
