#pragma once
/// Memory kinds, descriptors and descriptor lists.
/// The definitions live in <nixl/detail/memory.hpp> so that detail/ can use them without
/// including a header above its own folder.

#include <nixl/detail/memory.hpp>  // IWYU pragma: export
