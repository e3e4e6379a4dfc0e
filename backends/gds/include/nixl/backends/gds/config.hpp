#pragma once
/// The parameters of the GDS and GDS_MT backends, with NIXL's names and defaults.

#include <chrono>
#include <cstddef>
#include <string>

#include <nixl/memory.hpp>

namespace nixl::gds {

/// GDS (the cuFile batch API):
///  - `batch_pool_size` (16): cuFile batch handles set up at start; a request holds one or more
///    while in flight.
///  - `batch_limit` (128): entries per batch handle.
///  - `max_request_size` (16 MiB): descriptors are cut into chunks of at most this many bytes.
///  - `dram_batch` (false): DRAM chunks go through the batch API too. By default they are moved
///    with synchronous cuFileRead/cuFileWrite calls inside post(), and only VRAM chunks use the
///    batch API: in compatibility mode, host memory through the batch API gave wrong data on
///    libcufile 1.15 (docs/gds.md).
/// Both backends also take:
///  - `cufile_path` (""): the cuFile library to load; empty: `$NIXL_CUFILE_PATH`, else
///    "libcufile.so.0".
///  - `cancel_timeout_ms` (5000): how long releasing a request in flight waits for cuFile to
///    give its buffers back; past it the release answers `repost_active`.
struct config {
  unsigned batch_pool_size = 16;
  unsigned batch_limit = 128;
  std::size_t max_request_size = std::size_t{16} << 20;
  bool dram_batch = false;
  std::string cufile_path;
  std::chrono::milliseconds cancel_timeout{5000};

  /// Parses NIXL-style string params; throws `nixl::error(invalid_param)` on a bad value.
  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::gds

namespace nixl::gds_mt {

/// GDS_MT (synchronous cuFileRead/cuFileWrite on a pool of threads):
///  - `thread_count` (hardware threads / 2, at least 1): the pool's threads (NIXL's Python
///    `nixl_agent_config(num_threads=N)` sets it).
///  - `max_request_size` (16 MiB), `cufile_path`, `cancel_timeout_ms`: as for GDS.
struct config {
  unsigned thread_count = default_threads();
  std::size_t max_request_size = std::size_t{16} << 20;
  std::string cufile_path;
  std::chrono::milliseconds cancel_timeout{5000};

  static unsigned default_threads() noexcept;
  /// Parses NIXL-style string params; throws `nixl::error(invalid_param)` on a bad value.
  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::gds_mt
