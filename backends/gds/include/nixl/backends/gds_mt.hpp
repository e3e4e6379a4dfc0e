#pragma once
/// The GDS_MT backend (NIXL name "GDS_MT"): DRAM and VRAM <-> FILE on this host through
/// synchronous cuFileRead/cuFileWrite calls on a pool of `thread_count` threads. Local only.
///
/// Registration, path mode, chunking (`max_request_size`, `compat_chunk_size`) and the library
/// lookup are those of GDS (gds.hpp). Chunks go to the threads that went idle last. Each chunk
/// is one synchronous call; a short count is an error. Releasing a request in flight drops its
/// chunks not started and waits at most `cancel_timeout` for those running; past it the release
/// answers `repost_active` and the chunks finish on their own.

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds/config.hpp>
#include <nixl/backends/gds/detail/file_backend.hpp>
#include <nixl/backends/gds/detail/threads.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/backend_checks.hpp>

namespace nixl::gds_mt {

/// The GDS_MT backend: cuFile synchronous calls on a thread pool.
class backend : public gds::detail::file_backend<backend> {
 public:
  static constexpr std::string_view name = "GDS_MT";

  using config = gds_mt::config;
  static nixl::params default_params();

  /// The request's job, shared with the threads running its chunks.
  struct request {
    std::shared_ptr<gds::detail::job> job;
  };

  /// Loads cuFile, opens its driver and starts the threads. Throws `nixl::error(backend)`
  /// "libcufile not found (...)" without the library.
  backend(const config& cfg, const nixl::backend_context& ctx);
  ~backend();
  backend(backend&&) noexcept;
  backend& operator=(backend&&) noexcept;

  void prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer&);
  /// Queues the request's chunks: `in_progress`, or `success` for an empty request.
  nixl::status post(request& req, nixl::notif_arg notif) noexcept;
  /// `success` once every chunk is done, `backend` once every chunk stopped after a failure.
  nixl::status check(request& req) noexcept;
  /// Drops chunks not started, waits at most `cancel_timeout` for the running ones.
  nixl::status release(request& req) noexcept;

  unsigned thread_count() const noexcept;
  /// Threads waiting for work now.
  unsigned idle_threads() const noexcept;
  const config& settings() const noexcept { return cfg_; }
  /// The chunk size it cuts a request of `total` bytes at (compat_mode() decides).
  std::size_t chunk_size_for(std::size_t total) const noexcept;

 private:
  config cfg_;
  std::unique_ptr<gds::detail::thread_pool> pool_;
};

static_assert(nixl::storage_backend<backend>);
static_assert(nixl::backend_for_all<backend, route<dram_t, file_t>, route<vram_t, file_t>>);
static_assert(nixl::backend_for_none<backend, route<dram_t, dram_t>>);

}  // namespace nixl::gds_mt
