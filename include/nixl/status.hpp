#pragma once
/// Status codes of the hot path and the exception type of the setup path.
/// The definitions live in <nixl/detail/status.hpp> so that detail/ can use them without
/// including a header above its own folder.

#include <nixl/detail/status.hpp>  // IWYU pragma: export
