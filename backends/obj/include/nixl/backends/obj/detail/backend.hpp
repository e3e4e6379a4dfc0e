#pragma once
/// `basic_backend<Traits>`: the NIXL backend over one object store (store.hpp), DRAM or VRAM
/// <-> OBJ (VRAM through a pinned staging pool, with the CUDA driver loaded at run time), local
/// only (an agent transfers to itself, the object list on the remote side). OBJ and
/// AZURE_BLOB are this class with their own traits (name, config, store).

#include <charconv>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/backends/obj/detail/store.hpp>
#include <nixl/concepts.hpp>
#include <nixl/log.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::obj::detail {

/// The object's key of a registration: `meta` when not empty, else the decimal `dev`.
inline std::string key_of(const nixl::reg_desc& d) {
  return d.meta.empty() ? std::to_string(d.dev) : d.meta;
}

template <class Traits>
class basic_backend {
 public:
  static constexpr std::string_view name = Traits::name;
  using memory_kinds = nixl::kind_list<nixl::dram_t, nixl::vram_t, nixl::object_t>;

  /// DRAM or VRAM <-> OBJ, in either orientation of local and remote.
  static constexpr bool can_move(mem_kind local, mem_kind remote) noexcept {
    auto mem = [](mem_kind k) { return k == mem_kind::dram || k == mem_kind::vram; };
    return (mem(local) && remote == mem_kind::object) || (local == mem_kind::object && mem(remote));
  }

  using config = typename Traits::config;
  static nixl::params default_params() { return config{}.to_params(); }

  /// A registered range: for objects, the key; for VRAM, its CUDA device.
  struct region {
    mem_kind kind = mem_kind::dram;
    std::string key;
    int gpu = -1;
  };
  using remote_region = region;
  struct peer {};
  struct request {
    xfer_ptr x;
  };

  /// Starts the HTTP engine. Throws `nixl::error(backend)` when libcurl cannot start.
  basic_backend(const config& cfg, const nixl::backend_context& ctx)
      : store_(Traits::make_store(cfg, ctx)) {}

  /// DRAM: nothing to do. VRAM: checks the range with the CUDA driver and readies its device
  /// and the staging pool (`not_supported` "VRAM needs the CUDA driver (libcuda.so.1), not
  /// found" where there is none). OBJ: records the key (`meta`, else the decimal `dev`); the
  /// object need not exist yet. Throws `nixl::error(not_supported)` for other kinds.
  region register_region(mem_kind kind, const nixl::reg_desc& d) {
    if (kind == mem_kind::dram) return {kind, {}};
    if (kind == mem_kind::vram) return {kind, {}, attach_vram(*store_, d)};
    if (kind != mem_kind::object)
      raise(status::not_supported,
            "{} register_region: memory kind {} is not supported; use dram, "
            "vram or object",
            name, kind);
    return {kind, key_of(d)};
  }
  void deregister_region(region&) noexcept {}

  peer self_peer() noexcept { return {}; }
  remote_region load_local(const region& r) const { return r; }
  void unload_region(remote_region&) noexcept {}

  /// Resolves each pair into one object operation: a whole-object PUT (offset 0 only) or a
  /// ranged GET at the object descriptor's `addr`. Throws `nixl::error(invalid_param)` for
  /// pairs that are not dram/object, mixed directions, or a write at an offset.
  void prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
               std::span<const bound_desc<remote_region>> remote, peer&) {
    if (local.size() != remote.size())
      raise(status::invalid_param, "{} prepare: {} local and {} remote descriptors", name,
            local.size(), remote.size());
    std::vector<object_io> ios;
    ios.reserve(local.size());
    for (std::size_t i = 0; i < local.size(); ++i) {
      const auto& l = local[i];
      const auto& r = remote[i];
      const mem_kind lk = l.region != nullptr ? l.region->kind : mem_kind::dram;
      const mem_kind rk = r.region != nullptr ? r.region->kind : mem_kind::dram;
      if (!can_move(lk, rk))
        raise(status::invalid_param,
              "{} prepare: descriptor {} pairs local {} with remote {}; {} moves dram or vram "
              "<-> object only",
              name, i, lk, rk, name);
      const bool obj_remote = rk == mem_kind::object;
      const auto& mem = obj_remote ? static_cast<const desc&>(l) : static_cast<const desc&>(r);
      const auto& obj = obj_remote ? static_cast<const desc&>(r) : static_cast<const desc&>(l);
      const region& reg = obj_remote ? *r.region : *l.region;
      const region* mreg = obj_remote ? l.region : r.region;
      object_io io;
      if (mreg != nullptr && mreg->kind == mem_kind::vram) {
        if (mreg->gpu < 0)
          raise(status::invalid_param, "{} prepare: descriptor {}: VRAM without a device", name, i);
        io.gpu = mreg->gpu;
      }
      // read pulls remote into local: with the object remote that is a GET.
      io.write = (op == xfer_op::read) != obj_remote;
      io.key = reg.key;
      io.mem = reinterpret_cast<std::byte*>(mem.addr);
      io.offset = obj.addr;
      io.len = mem.len;
      if (io.write && io.offset != 0)
        raise(status::invalid_param,
              "{} prepare: descriptor {} writes object '{}' at offset {}; objects are written "
              "whole: use offset 0",
              name, i, io.key, io.offset);
      ios.push_back(std::move(io));
    }
    req.x = make_xfer(*store_, std::move(ios));
  }

  /// Queues the request's HTTP requests. Notifications are not supported (`not_supported`).
  nixl::status post(request& req, nixl::notif_arg notif) noexcept {
    if (notif.has_value()) return nixl::status::not_supported;
    if (!req.x) return nixl::status::invalid_param;
    return detail::post(*store_, *req.x);
  }
  nixl::status check(request& req) noexcept {
    if (!req.x) return nixl::status::invalid_param;
    return detail::check(*store_, *req.x);
  }
  nixl::status release(request& req) noexcept {
    if (!req.x) return nixl::status::success;
    nixl::status s = detail::release(*store_, *req.x);
    req.x.reset();
    return s;
  }

  /// HEAD of each object: {size, etag, last_modified}, or nullopt when it does not exist.
  std::vector<std::optional<nixl::params>> query_memory(std::span<const nixl::reg_desc> d) {
    return query(*store_, d);
  }

  /// The message of the request's last failure (the server's code and message, or why the
  /// request did not reach it); empty when it did not fail.
  std::string_view error_message(const request& req) const noexcept {
    return req.x ? error_text(*req.x) : std::string_view{};
  }

  /// HTTP requests sent so far, and how many of them were retries.
  store_stats stats() const noexcept { return detail::stats(*store_); }
  /// True while the engine's thread counts an application thread as polling (a status check of
  /// a request in flight within the last 2 ms): a post then leaves the thread's wake-up to the
  /// next check (docs/obj.md, "Posting").
  bool polled_window() const noexcept { return detail::polled(*store_); }

  /// Creates the bucket or container when it does not exist yet (not part of NIXL; for tests
  /// and benchmarks against local servers).
  void create_bucket() { detail::create_bucket(*store_); }

 private:
  store_ptr store_;
};

}  // namespace nixl::obj::detail
