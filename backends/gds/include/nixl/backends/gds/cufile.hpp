#pragma once
/// The part of NVIDIA's cuFile API that the GDS backends use (`nixl::gds::cufile`), and its loader.
/// The definitions live in <nixl/backends/gds/detail/cufile.hpp> so that the backend's detail/ can
/// use them without including a header above its own folder.

#include <nixl/backends/gds/detail/cufile.hpp>  // IWYU pragma: export
