#pragma once
/// The parameters of the GDS and GDS_MT backends, with NIXL's names and defaults.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <nixl/memory.hpp>

namespace nixl::gds {

/// Whether cuFile runs in compatibility mode (POSIX I/O through its bounce buffers, without the
/// nvidia-fs kernel module): `automatic` asks `$NIXL_GDS_COMPAT_MODE` (a boolean) and, without
/// it, looks for the module (`resolve_compat`).
enum class compat_setting : unsigned char { automatic, on, off };
/// "auto", "true" or "false".
std::string to_string(compat_setting s);

/// Where the nvidia-fs kernel module shows when it is loaded.
inline constexpr std::string_view nvidia_fs_module_dir = "/sys/module/nvidia_fs";
/// In compatibility mode: the most chunks the chunk size aims at for one request (it grows past
/// `compat_chunk_size`, never past `max_request_size`, to stay within them).
inline constexpr std::size_t max_compat_chunks = 128;
/// GDS (batch API) in compatibility mode aims lower: cuFile's POSIX path serves a batch's
/// entries from a pool of its own, which larger entries keep busy with fewer submissions
/// (measured on the H200: 16 MiB READ at 0.90x of the direct call with 64 entries of 256 KiB,
/// 1.33x with 16 of 1 MiB).
inline constexpr std::size_t batch_compat_chunks = 16;

/// on: true; off: false; automatic: `$NIXL_GDS_COMPAT_MODE` when set and not "auto" (a
/// boolean; throws `nixl::error(invalid_param)` for another value), else true when
/// `module_dir` does not exist (no nvidia-fs: cuFile can only work in compatibility mode).
bool resolve_compat(compat_setting s, std::string_view module_dir = nvidia_fs_module_dir);

/// The chunk size for a request of `total` bytes: `max_request` outside compatibility mode;
/// in it, `compat_chunk` (at most `max_request`), grown to `total / max_chunks` rounded up to
/// 4 KiB when that is more, but never past `max_request`.
std::size_t chunk_size(bool compat, std::size_t max_request, std::size_t compat_chunk,
                       std::size_t max_chunks, std::size_t total) noexcept;

/// GDS (the cuFile batch API):
///  - `batch_pool_size` (16): cuFile batch handles set up at start; a request holds one or more
///    while in flight.
///  - `batch_limit` (128): entries per batch handle.
///  - `max_request_size` (16 MiB): descriptors are cut into chunks of at most this many bytes.
///  - `compat_mode` ("auto"; or a boolean): cuFile's compatibility mode, see `compat_setting`.
///    In compatibility mode chunks are `compat_chunk_size` (256 KiB), never more than
///    `max_request_size`, and grow (up to `max_request_size`) so that a request has at most
///    `max_inflight` of them (docs/gds.md, "Chunk size").
///  - `max_inflight` (0: automatic): batch entries one request keeps in flight; 0 is
///    `batch_limit` in compatibility mode (cuFile blocks for good when the entries in flight
///    outnumber its POSIX bounce buffers) and no cap with nvidia-fs.
///  - `dram_batch` (false): DRAM chunks go through the batch API too. By default they are moved
///    with synchronous cuFileRead/cuFileWrite calls on the backend's own threads, and only VRAM
///    chunks use the batch API: in compatibility mode, host memory through the batch API gave
///    wrong data on libcufile 1.15 (docs/gds.md). So it applies with nvidia-fs only: in
///    compatibility mode DRAM chunks always go to the threads.
///  - `io_threads` (2): the backend's threads: they move DRAM chunks and submit the batches of
///    a post that holds more than `backend::inline_entries` entries.
///  - `compat_thread_size` (1 MiB; 0: never): in compatibility mode, a request of at most this
///    many bytes, VRAM included, is moved by those threads with synchronous calls in chunks of
///    `max_request_size`, as GDS_MT moves it: cuFile's batch path hands every entry to threads
///    of its own, a hand-off that costs a small request more than its I/O (docs/gds.md).
/// Both backends also take:
///  - `compat_mode`, `compat_chunk_size`: as above.
///  - `cufile_path` (""): the cuFile library to load; empty: `$NIXL_CUFILE_PATH`, else
///    "libcufile.so.0".
///  - `cancel_timeout_ms` (5000): how long releasing a request in flight waits for cuFile to
///    give its buffers back; past it the release answers `repost_active`.
///  - `thread_spin_us` (50): how long a thread that ran out of chunks keeps looking for the next
///    one before it sleeps; a post within that time skips the wake-up (0: sleep at once).
struct config {
  unsigned batch_pool_size = 16;
  unsigned batch_limit = 128;
  std::size_t max_request_size = std::size_t{16} << 20;
  compat_setting compat_mode = compat_setting::automatic;
  std::size_t compat_chunk_size = std::size_t{256} << 10;
  unsigned max_inflight = 0;
  bool dram_batch = false;
  /// Not a parameter: lets `dram_batch` act in compatibility mode too, which libcufile 1.15
  /// mishandles (wrong data, failed entries, a crash); for tests over a fake libcufile.
  bool host_batch_in_compat = false;
  unsigned io_threads = 2;
  std::size_t compat_thread_size = std::size_t{1} << 20;
  std::string cufile_path;
  std::chrono::milliseconds cancel_timeout{5000};
  std::chrono::microseconds thread_spin{50};

  /// Parses NIXL-style string params; throws `nixl::error(invalid_param)` on a bad value.
  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::gds

namespace nixl::gds_mt {

/// GDS_MT (synchronous cuFileRead/cuFileWrite on a pool of threads):
///  - `thread_count` (hardware threads / 2, at least 1): the pool's threads (NIXL's Python
///    `nixl_agent_config(num_threads=N)` sets it).
///  - `max_request_size` (16 MiB), `compat_mode`, `compat_chunk_size` (1 MiB), `cufile_path`,
///    `cancel_timeout_ms`, `thread_spin_us`: as for GDS; in compatibility mode the chunks of one
///    request grow so that there are at most `gds::max_compat_chunks` (128) of them.
struct config {
  unsigned thread_count = default_threads();
  std::size_t max_request_size = std::size_t{16} << 20;
  gds::compat_setting compat_mode = gds::compat_setting::automatic;
  std::size_t compat_chunk_size = std::size_t{1} << 20;
  std::string cufile_path;
  std::chrono::milliseconds cancel_timeout{5000};
  std::chrono::microseconds thread_spin{50};

  static unsigned default_threads() noexcept;
  /// Parses NIXL-style string params; throws `nixl::error(invalid_param)` on a bad value.
  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::gds_mt
