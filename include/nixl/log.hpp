#pragma once
/// Minimal levelled logging to stderr (NIXL_LOG_LEVEL), with a replaceable sink.
/// The definitions live in <nixl/detail/log.hpp> so that detail/ can use them without
/// including a header above its own folder.

#include <nixl/detail/log.hpp>  // IWYU pragma: export
