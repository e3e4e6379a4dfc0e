#pragma once
/// The POSIX backend: moves bytes between DRAM and files of this host, with io_uring (liburing),
/// Linux AIO (libaio) or plain pread/pwrite on a small worker pool. Local only: an agent
/// transfers to itself, with the file list on the remote side (NIXL's "loopback" storage use).
///
/// FILE registration entries carry the file descriptor as `dev`, `addr` is the file offset and
/// `len == 0` means unbounded. `meta` may name the file: either a plain path (used by
/// `query_memory` and in messages) or NIXL's path mode `"<ro|rw>[,direct][,sync][,noatime]
/// [,create]:<path>"`, where the backend opens the file at registration and closes it at
/// deregistration (`dev` is then only an identifier, unique per file).
/// READ moves file -> memory, WRITE memory -> file.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nixl/backends/posix/config.hpp>
#include <nixl/backends/posix/detail/engine.hpp>
#include <nixl/concepts.hpp>
#include <nixl/detail/backend_checks.hpp>
#include <nixl/detail/file_region.hpp>
#include <nixl/log.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::posix {

/// The POSIX backend (NIXL name "POSIX"): DRAM <-> FILE on this host.
class backend {
 public:
  static constexpr std::string_view name = "POSIX";
  using memory_kinds = nixl::kind_list<nixl::dram_t, nixl::file_t>;

  /// Only DRAM <-> FILE, in either orientation of local and remote.
  static constexpr bool can_move(mem_kind local, mem_kind remote) noexcept {
    return (local == mem_kind::dram && remote == mem_kind::file) ||
           (local == mem_kind::file && remote == mem_kind::dram);
  }

  /// The parameters (posix/config.hpp).
  using config = posix::config;
  /// The advertised parameters with their defaults.
  static nixl::params default_params();

  /// A registered range. For files: the descriptor to use (opened here in path mode, then
  /// closed with the region), and what O_DIRECT requires.
  struct region : nixl::detail::file_ref {
    mem_kind kind = mem_kind::dram;
    bool direct = false;  // opened with O_DIRECT
    std::uint32_t mem_align = 1;
    std::uint32_t off_align = 1;
  };
  /// The same range seen from the initiator side (always this agent: loopback only).
  struct remote_region {
    mem_kind kind = mem_kind::dram;
    int fd = -1;
    bool direct = false;
    std::uint32_t mem_align = 1;
    std::uint32_t off_align = 1;
  };
  /// Local only: the one peer is the agent itself.
  struct peer {};
  /// Per-request state: the resolved operations and their progress.
  struct request {
    detail::io_batch batch;
    bool reported = false;
  };

  /// Starts the engine chosen by `cfg` (falling back as described above). Throws
  /// `nixl::error(backend)` when no engine can start.
  backend(const config& cfg, const nixl::backend_context& ctx);
  ~backend();
  backend(backend&&) noexcept;
  backend& operator=(backend&&) noexcept;

  /// Registers DRAM (nothing to do) or a file: checks the descriptor or opens the path given in
  /// path mode. Throws `nixl::error(invalid_param)` for a closed descriptor or a path that cannot
  /// be opened.
  region register_region(mem_kind kind, const nixl::reg_desc& d);
  void deregister_region(region& r) noexcept;

  peer self_peer() noexcept { return {}; }
  remote_region load_local(const region& r) const noexcept {
    return {r.kind, r.fd, r.direct, r.mem_align, r.off_align};
  }
  void unload_region(remote_region&) noexcept {}

  /// Resolves the descriptor pairs into pread/pwrite operations. Throws `nixl::error
  /// (invalid_param)` when a pair is not dram/file or breaks the O_DIRECT alignment of its file.
  void prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer&);

  /// Starts the request: `success` when it completed inline, `in_progress`, or `backend` on an
  /// I/O error. Notifications are not supported (`not_supported`).
  nixl::status post(request& req, nixl::notif_arg notif) noexcept {
    if (notif.has_value()) return nixl::status::not_supported;
    if (req.batch.state.busy()) return nixl::status::repost_active;
    req.batch.reset();
    req.reported = false;
    return to_status(req, std::visit([&](auto& e) { return e.submit(req.batch); }, engine_));
  }
  /// Progresses the engine and reports the request's state.
  nixl::status check(request& req) noexcept {
    return to_status(req, std::visit([&](auto& e) { return e.poll(req.batch); }, engine_));
  }
  /// Cancels what is still queued, waits for what is in flight. Always `success`.
  nixl::status release(request& req) noexcept {
    std::visit([&](auto& e) { e.cancel(req.batch); }, engine_);
    return nixl::status::success;
  }

  /// For each entry: `{size, mode, mtime}` of the file named in `meta` (plain path or path mode;
  /// the open descriptor `dev` when `meta` is empty), or nullopt when the file does not exist.
  /// Throws `nixl::error(backend)` when a file exists but cannot be examined.
  std::vector<std::optional<nixl::params>> query_memory(std::span<const nixl::reg_desc> d) const;

  /// The engine in use ("URING", "AIO" or "POSIX").
  std::string_view engine_name() const noexcept {
    return detail::to_string(detail::kind_of(engine_));
  }
  /// Operations in flight at most.
  unsigned queue_depth() const noexcept {
    return std::visit([](const auto& e) { return e.depth(); }, engine_);
  }

 private:
  /// The engine's answer `s`, the failure logged once.
  nixl::status to_status(request& req, nixl::status s) noexcept {
    if (s == nixl::status::backend && !req.reported) report(req);
    return s;
  }
  void report(request& req) const noexcept;

  detail::engine engine_;  // io_uring, AIO or pread/pwrite, chosen at construction
};

static_assert(nixl::storage_backend<backend>);
static_assert(nixl::backend_for_all<backend, route<dram_t, file_t>, route<file_t, dram_t>>);
static_assert(nixl::backend_for_none<backend, route<dram_t, dram_t>, route<file_t, file_t>,
                                     route<vram_t, file_t>>);

}  // namespace nixl::posix
