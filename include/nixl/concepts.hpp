#pragma once
/// What a backend is, layered: backend -> remote_backend -> notifying_backend, and backend_for.
/// The definitions live in <nixl/detail/concepts.hpp> so that detail/ can use them without
/// including a header above its own folder.

#include <nixl/detail/concepts.hpp>  // IWYU pragma: export
