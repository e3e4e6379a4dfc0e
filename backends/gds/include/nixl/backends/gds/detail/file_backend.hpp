#pragma once
/// What GDS and GDS_MT show the agent alike: the kinds they move, their region types, the
/// registration of files and buffers through one `shared_state`, and queries. Each backend adds
/// its name, parameters and the way it moves chunks (batches, or threads).

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/gds/detail/common.hpp>
#include <nixl/concepts.hpp>
#include <nixl/memory.hpp>

namespace nixl::gds {

/// DRAM or VRAM with FILE, in either orientation of local and remote.
constexpr bool moves_file(mem_kind local, mem_kind remote) noexcept {
  auto mem = [](mem_kind k) { return k == mem_kind::dram || k == mem_kind::vram; };
  return (mem(local) && remote == mem_kind::file) || (local == mem_kind::file && mem(remote));
}

namespace detail {

/// The base of a cuFile backend `Self` (CRTP only for its types: each backend has its own
/// region types, so that GDS and GDS_MT can share an agent).
template <class Self>
class file_backend {
 public:
  using memory_kinds = nixl::kind_list<nixl::dram_t, nixl::vram_t, nixl::file_t>;
  static constexpr bool can_move(mem_kind local, mem_kind remote) noexcept {
    return moves_file(local, remote);
  }

  /// A registered range.
  struct region : detail::region {
    region() = default;
    region(detail::region&& r) noexcept : detail::region(std::move(r)) {}
  };
  /// The same range as a transfer target of the agent itself.
  struct remote_region : detail::remote_region {};
  /// Local only: the one peer is the agent itself.
  struct peer {};

  /// DRAM: tries a cuFile buffer registration (a failure only costs speed). VRAM: registers the
  /// buffer on GPU `dev`. FILE: checks the descriptor (or opens the path-mode file) and
  /// registers it with cuFile once per descriptor. Throws `nixl::error(invalid_param)` for a
  /// closed descriptor or a path that cannot be opened, `nixl::error(backend)` when cuFile
  /// refuses (a file on tmpfs, for one).
  region register_region(mem_kind kind, const nixl::reg_desc& d) {
    return state_->register_region(kind, d);
  }
  void deregister_region(region& r) noexcept { state_->drop(r); }

  peer self_peer() noexcept { return {}; }
  remote_region load_local(const region& r) const noexcept {
    return {{r.kind, r.fd, r.fh, r.device, r.buf}};
  }
  void unload_region(remote_region&) noexcept {}

  /// For each entry: `{size, mode, mtime}` of the file (the path in `meta`, else the open
  /// descriptor `dev`), or nullopt when it does not exist.
  std::vector<std::optional<nixl::params>> query_memory(std::span<const nixl::reg_desc> d) const {
    return state_->query_memory(d);
  }

  /// Whether this backend treats cuFile as being in compatibility mode (`compat_mode`,
  /// resolved at creation).
  bool compat_mode() const noexcept { return compat_; }

 protected:
  /// Claims the agent's one cuFile backend, loads cuFile (from `lib_path`, see
  /// `cufile::library_path`) and opens its driver. Throws `nixl::error(not_allowed)` when the
  /// agent has the other of GDS and GDS_MT, `nixl::error(backend)` "libcufile not found (...)"
  /// without the library.
  file_backend(std::string_view who, bool compat, std::string_view agent, std::string_view lib_path)
      : claim_(who, agent),
        compat_(compat),
        state_(std::make_unique<shared_state>(who, agent, lib_path)) {}
  ~file_backend() = default;
  file_backend(file_backend&&) noexcept = default;
  file_backend& operator=(file_backend&&) noexcept = default;

  agent_claim claim_;  // first: refused before cuFile is loaded
  bool compat_ = false;
  std::unique_ptr<shared_state> state_;
};

}  // namespace detail
}  // namespace nixl::gds
