#pragma once
/// Checked calls into libfabric: NIXL_FI_CHECK, NIXL_FI_WARN.
/// The definitions live in <nixl/backends/libfabric/detail/check.hpp> so that the backend's
/// detail/ can use them without including a header above its own folder.

#include <nixl/backends/libfabric/detail/check.hpp>  // IWYU pragma: export
