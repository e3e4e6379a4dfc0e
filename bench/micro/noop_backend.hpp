#pragma once
/// A backend that moves nothing: registration, prepare, post, check and release do the least a
/// real backend does (prepare copies the resolved pairs, inline up to four, post and check
/// return at once), so
/// that a benchmark over it times the agent and request layers alone. Loopback only, DRAM.
/// Parameter `polls=N`: each posted request reports `in_progress` N times before `success`.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nixl/concepts.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::bench {

class noop_backend {
 public:
  static constexpr std::string_view name = "NOOP";
  using memory_kinds = kind_list<dram_t>;

  struct config {
    int polls = 0;
    static config from_params(const params& p) {
      config c;
      if (auto it = p.find("polls"); it != p.end()) c.polls = std::stoi(it->second);
      return c;
    }
  };
  static params default_params() { return {{"polls", "0"}}; }

  struct region {
    std::uintptr_t addr = 0;
  };
  struct remote_region {
    std::uintptr_t addr = 0;
  };
  struct peer {};
  struct op {
    std::uintptr_t local, remote;
    std::size_t len;
  };
  /// The resolved pairs: up to `inline_ops` inside the request (as a backend keeps a short
  /// list), more on the heap.
  static constexpr std::size_t inline_ops = 4;
  struct request {
    std::array<op, inline_ops> few{};
    std::vector<op> many;
    std::size_t count = 0;
    int left = 0;
  };

  noop_backend(const config& c, const backend_context&) : cfg_(c) {}

  region register_region(mem_kind, const reg_desc& d) { return {d.addr}; }
  void deregister_region(region&) noexcept {}

  void prepare(request& r, xfer_op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer&) {
    r.count = local.size();
    if (r.count > inline_ops) r.many.resize(r.count);
    op* out = r.count > inline_ops ? r.many.data() : r.few.data();
    for (std::size_t i = 0; i < r.count; ++i)
      out[i] = {local[i].addr, remote[i].addr, local[i].len};
  }
  status post(request& r, notif_arg) noexcept {
    r.left = cfg_.polls;
    return r.left > 0 ? status::in_progress : status::success;
  }
  status check(request& r) noexcept {
    return r.left > 0 && --r.left > 0 ? status::in_progress : status::success;
  }
  status release(request&) noexcept { return status::success; }

  peer self_peer() { return {}; }
  remote_region load_local(const region& r) { return {r.addr}; }
  void unload_region(remote_region&) noexcept {}

 private:
  config cfg_;
};

static_assert(backend<noop_backend>);
static_assert(loopback_backend<noop_backend>);
static_assert(backend_for<noop_backend, dram_t, dram_t>);

}  // namespace nixl::bench
