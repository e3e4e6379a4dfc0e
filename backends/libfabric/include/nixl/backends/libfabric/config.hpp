#pragma once
/// `nixl::libfabric::config`: the LIBFABRIC backend's settings.
/// The definitions live in <nixl/backends/libfabric/detail/config.hpp> so that the backend's
/// detail/ can use them without including a header above its own folder.

#include <nixl/backends/libfabric/detail/config.hpp>  // IWYU pragma: export
