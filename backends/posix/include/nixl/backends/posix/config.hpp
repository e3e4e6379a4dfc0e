#pragma once
/// `nixl::posix::config`: the POSIX backend's settings, parsed from NIXL's parameter names.

#include <cstddef>
#include <optional>

#include <nixl/backends/posix/detail/engine.hpp>
#include <nixl/memory.hpp>

namespace nixl::posix {

/// Parameters (NIXL names where NIXL has them):
///  - `use_uring`, `use_aio`, `use_posix` (alias `use_posix_aio`): pick the engine; the first
///    "true" in the order aio, uring, posix wins. With none true: io_uring, then AIO, then
///    posix, skipping engines set to "false". An engine that cannot start here falls back to
///    the next one, with a warning in the log.
///  - `kernel_queue_size` (256): operations in flight per backend for io_uring and AIO.
///  - `num_threads` (4): worker threads of the posix engine; 0 runs each request inline in
///    `post`.
///  - `ios_pool_size` (65536): accepted for NIXL compatibility; operations are allocated per
///    request when it is prepared, so there is no pool to size.
struct config {
  std::optional<detail::engine_kind> preferred;  // first "true" flag
  bool allowed[3] = {true, true, true};          // by engine_kind; "false" flags clear them
  unsigned queue_depth = 256;
  unsigned threads = 4;
  std::size_t ios_pool_size = 65536;

  /// Parses NIXL-style string params; throws `nixl::error(invalid_param)` on a bad value.
  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::posix
