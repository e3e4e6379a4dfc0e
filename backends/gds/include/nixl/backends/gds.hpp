#pragma once
/// The GDS backend (NIXL name "GDS"): DRAM and VRAM <-> FILE on this host through cuFile's
/// batch API (DRAM through synchronous calls on threads of its own, unless `dram_batch`). Local
/// only: an agent transfers to itself, with the file list on the remote side.
///
/// cuFile is loaded at run time (libcufile.so.0; `cufile_path` or `$NIXL_CUFILE_PATH` name
/// another); without it creating the backend throws "libcufile not found". Descriptors are cut
/// into chunks of at most `max_request_size` bytes (in cuFile's compatibility mode smaller ones,
/// `compat_chunk_size`: config.hpp), which a request submits on cuFile batch handles of
/// `batch_limit` entries taken from a pool of `batch_pool_size`: as many as it needs and are
/// free, reusing them as batches complete, with at most `max_inflight` entries in flight. A post
/// that finds no handle free returns `status::backend` at once ("batch pool exhausted" in the
/// log), never waits.
///
/// FILE registration: the file descriptor as `dev`, or NIXL's path mode in `meta`,
/// `"<ro|rw>[,direct][,sync][,noatime][,create]:<path>"` (opened here, closed at
/// deregistration). `len == 0` means unbounded. READ moves file -> memory, WRITE memory -> file.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/gds/config.hpp>
#include <nixl/backends/gds/detail/batch.hpp>
#include <nixl/backends/gds/detail/common.hpp>
#include <nixl/backends/gds/detail/file_backend.hpp>
#include <nixl/backends/gds/detail/threads.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/backend_checks.hpp>
#include <nixl/detail/completion.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::gds {

/// The GDS backend: cuFile batches.
class backend : public detail::file_backend<backend> {
 public:
  static constexpr std::string_view name = "GDS";

  using config = gds::config;
  static nixl::params default_params();

  /// A request's chunks and the batch handles it holds while in flight.
  struct request {
    detail::plan plan;                           // the chunks for the batch API
    std::shared_ptr<detail::job> sync;           // chunks for the threads (none: null)
    std::shared_ptr<detail::launch_job> launch;  // the post's batches, for a thread to submit
    std::vector<detail::batch_slot*> slots;      // capacity reserved at prepare
    std::size_t next = 0;                        // first chunk not submitted yet
    std::size_t done = 0;                        // chunks complete
    bool failing = false;                        // failed: ends once the DRAM chunks stopped
    nixl::detail::completion state;              // idle, busy, or done with its status
  };

  /// Loads cuFile, opens its driver, sets up the batch pool and starts `io_threads` threads.
  /// Throws `nixl::error(backend)`
  /// "libcufile not found (...)" without the library, or naming the cuFile call that failed.
  backend(const config& cfg, const nixl::backend_context& ctx);
  ~backend();
  backend(backend&&) noexcept;
  backend& operator=(backend&&) noexcept;

  /// Cuts the descriptor pairs into chunks. Throws `nixl::error(invalid_param)` when a pair is
  /// not memory <-> file, or while the request is in flight (`repost_active`).
  void prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer&);

  /// Fills in the first batches and hands them to a thread to submit (submits them itself when
  /// they hold at most `inline_entries`), and hands the DRAM chunks (unless `dram_batch`) to the
  /// threads, and in compatibility mode a request of at most `compat_thread_size` whole; waits for
  /// no I/O: `in_progress`, `success` for an empty request, `backend` when the pool has no free
  /// handle. Notifications: `not_supported`.
  nixl::status post(request& req, nixl::notif_arg notif) noexcept;
  /// Polls the request's batches and DRAM chunks without waiting, submits the next batches as
  /// handles free up. A failed chunk or a batch cuFile refuses ends it with `backend` once
  /// nothing of it runs any longer (the rest canceled).
  nixl::status check(request& req) noexcept;
  /// Cancels what is in flight and waits at most `cancel_timeout` for cuFile to give the
  /// entries back and for running DRAM chunks: `success`, or `repost_active` when it did not
  /// (the request keeps them).
  nixl::status release(request& req) noexcept;

  /// Batch entries one request keeps in flight at most (0: no cap), `max_inflight` resolved.
  unsigned inflight_cap() const noexcept { return inflight_cap_; }
  /// Batch handles in the pool, and how many are free now.
  unsigned pool_size() const noexcept;
  std::size_t free_batches() const noexcept;
  /// The backend's threads (DRAM chunks, batch submissions), and how many wait for work now.
  unsigned io_threads() const noexcept;
  unsigned idle_io_threads() const noexcept;
  /// A post submits its first batches itself when they hold at most this many entries (cheap
  /// enough), else a thread does.
  static constexpr unsigned inline_entries = 2;
  const config& settings() const noexcept { return cfg_; }
  /// The chunk size it cuts a request of `total` bytes at (compat_mode() decides).
  std::size_t chunk_size_for(std::size_t total) const noexcept;

 private:
  nixl::status fail(request& req) noexcept;
  void fill(request& req, detail::batch_slot& s) noexcept;
  bool submit(request& req, detail::batch_slot& s) noexcept;
  void settle_launch(request& req) noexcept;
  /// Batches submitted or being submitted, or DRAM chunks running: prepare and post refuse.
  static bool in_flight(const request& req) noexcept;
  /// Hands the request's DRAM chunks to the threads.
  void start_sync(request& req) noexcept;
  nixl::status settle(request& req) noexcept;
  nixl::status poll(request& req) noexcept;
  bool drain(request& req) noexcept;

  std::size_t slots_wanted(std::size_t chunks) const noexcept;

  config cfg_;
  unsigned inflight_cap_ = 0;
  std::unique_ptr<detail::batch_pool> pool_;
  std::unique_ptr<detail::thread_pool> threads_;  // DRAM chunks and batch submissions
};

static_assert(nixl::storage_backend<backend>);
static_assert(nixl::backend_for_all<backend, route<dram_t, file_t>, route<vram_t, file_t>,
                                    route<file_t, vram_t>>);
static_assert(nixl::backend_for_none<backend, route<dram_t, vram_t>, route<file_t, file_t>>);

}  // namespace nixl::gds
