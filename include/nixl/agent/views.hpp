#pragma once
/// Members of `nixl::agent` (<nixl/agent.hpp>) about memory views for GPU-initiated transfers
/// (NIXL's prepMemView / releaseMemView; the device side is nixl/device.cuh and NIXL's
/// nixl_device.cuh). A view is a device-resident array of pointers the host resolved here:
/// this process's own VRAM for a local list; for a remote list, each entry's address in this
/// process (the peer's own pointer when the peer is an agent of this process, the peer's VRAM
/// mapped through CUDA IPC when it is another process of this host). Peers on another host are
/// refused with not_supported: that needs UCX's device API (rc_gda), which this build does not
/// drive. See docs/device.md.

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/views.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/detail/cuda_ipc.hpp>
#include <nixl/detail/device_views.hpp>
#include <nixl/detail/resolve.hpp>

namespace nixl {

namespace detail::views {

/// `worker_id=N` in NIXL's customParam (accepted; views do not use workers); throws
/// invalid_param for a `worker_id=` that is not a number.
inline void check_custom(std::string_view custom) {
  const auto at = custom.find("worker_id=");
  if (at == std::string_view::npos) return;
  std::string_view v = custom.substr(at + 10);
  v = v.substr(0, v.find_first_of(" ,;"));
  unsigned long n = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || r.ec != std::errc{} || r.ptr != v.data() + v.size())
    raise(status::invalid_param, "prepare_view: customParam 'worker_id={}' is not a number", v);
}

/// Where this process reaches [d.addr, d.addr + d.len) of a peer's region `r` (B's
/// remote_region), the device that reaches it, and what keeps that mapping open; throws
/// not_supported with the reason when this process cannot reach it from a kernel.
struct reach_result {
  std::uint64_t ptr = 0;
  int device = 0;
  std::shared_ptr<const void> keep;
};

template <class B, class R>
reach_result reach(const R& r, const desc& d) {
  reach_result out;
  out.device = static_cast<int>(d.dev);
  if constexpr (requires {
                  r.access;
                  r.reachable;
                  r.device_access;
                  r.addr;
                }) {  // CUDA backend
    // reach: ok = 0, other_host = 1, other_process_dram = 2, no_ipc = 3, no_gpu = 4
    const auto why = static_cast<int>(r.reachable);
    if (why == 1)
      raise(status::not_supported,
            "prepare_view: the peer is on another host; GPU-initiated transfers across nodes need "
            "UCX's device API (rc_gda), which this build does not provide");
    if (why != 0 || !r.device_access || r.access == 0)
      raise(status::not_supported,
            "prepare_view: {} cannot map the peer's region at {:#x} into this process (reach {})",
            B::name, r.addr, why);
    out.ptr = r.access + (d.addr - r.addr);
    if (r.device >= 0) out.device = r.device;
    return out;
  } else if constexpr (requires {
                         r.peer->is_self;
                         r.peer->local_alive;
                         r.ipc;
                         r.range;
                       }) {
    // UCX backend: an agent of this process shares the address space; another process of this
    // host exported the allocation through CUDA IPC.
    if (r.peer != nullptr && (r.peer->is_self || r.peer->local_alive)) {
      out.ptr = d.addr;
      return out;
    }
    if (r.ipc == nullptr)
      raise(status::not_supported,
            "prepare_view: the peer's region at {:#x} has no CUDA IPC handle (a peer on another "
            "host, or memory that cannot be exported); GPU-initiated transfers across nodes need "
            "UCX's device API (rc_gda), which this build does not provide",
            r.range.addr);
    cu::driver* drv = cu::usable_driver();
    if (drv == nullptr)
      raise(status::not_supported, "prepare_view: CUDA IPC needs {}", cu::get_driver().why);
    const int dev = drv->ordinal_of(r.ipc->x.uuid.data());
    if (dev < 0)
      raise(status::not_supported,
            "prepare_view: the GPU of the peer's region at {:#x} is not visible here",
            r.range.addr);
    std::string err;
    auto lease = cu::open_ipc(r.ipc->x.handle, dev, err);
    if (!lease) raise(status::backend, "prepare_view: {}", err);
    out.ptr = reinterpret_cast<std::uint64_t>(lease->view().base) + r.ipc->x.offset +
              (d.addr - r.range.addr);
    out.device = dev;
    out.keep = std::move(lease);
    return out;
  } else {
    raise(status::not_supported, "prepare_view: {} has no device mapping of a peer's memory",
          B::name);
  }
}

}  // namespace detail::views

template <class... Backends>
void* agent<Backends...>::prepare_view(const xfer_dlist& list, const view_options& opt) {
  detail::views::check_custom(opt.custom);
  if (list.kind() != mem_kind::vram)
    raise(status::not_found,
          "prepare_view: no backend makes memory views of {} (views are of VRAM)", list.kind());
  auto g = lock_.exclusive();
  detail::views::record rec;
  std::vector<device::abi::entry> out(list.size());
  bool found = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (found || !detail::selected<B>(opt.backends)) return;
    if constexpr (contains(typename B::memory_kinds{}, mem_kind::vram)) {
      auto& s = slot<B>();
      if (!s.engine) return;
      const auto& idx = s.regions[static_cast<std::size_t>(mem_kind::vram)];
      if (idx.empty()) return;
      std::vector<detail::region_pin> pins;
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto* e = idx.find_covering(list[i]);
        if (e == nullptr) return;  // this backend cannot resolve every entry
        pins.push_back(e->pin);
        out[i] = opt.registration_base ? device::abi::entry{e->range.addr, e->range.len}
                                       : device::abi::entry{list[i].addr, list[i].len};
      }
      found = true;
      rec.pins = std::move(pins);
    }
  });
  if (!found)
    raise(status::not_found,
          "prepare_view: no backend{} of agent '{}' has every entry of the list registered",
          opt.backends.empty() ? "" : " among those named", name_);
  const int dev = list.empty() ? 0 : detail::cu::get_driver().clamp(list[0].dev);
  rec.handle =
      detail::views::device_store::get().upload(dev, device::abi::side_local, mem_kind::vram, out);
  void* h = rec.handle;
  views_.push_back(std::move(rec));
  return h;
}

template <class... Backends>
void* agent<Backends...>::prepare_view(mem_kind kind, std::span<const remote_entry> list,
                                       const view_options& opt) {
  detail::views::check_custom(opt.custom);
  if (kind != mem_kind::vram)
    raise(status::not_found,
          "prepare_view: no backend makes memory views of {} (views are of VRAM)", kind);
  auto g = lock_.exclusive();
  prune();
  detail::views::record rec;
  std::vector<device::abi::entry> out(list.size(), device::abi::entry{0, 0});
  int chosen = -1;  // the backend of the first real entry, by type index
  int dev = opt.device;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const remote_entry& x = list[i];
    if (x.agent == null_agent) continue;  // a placeholder keeps the indices aligned
    const auto& st = find_peer(x.agent, "prepare_view");
    rec.peers.push_back(st);
    bool done = false;
    std::string refusal;
    int type_index = 0;
    detail::for_each_type<Backends...>([&]<class B>() {
      const int me = type_index++;
      if (done || (chosen >= 0 && chosen != me)) return;
      if (chosen < 0 && !detail::selected<B>(opt.backends)) return;
      if constexpr (contains(typename B::memory_kinds{}, mem_kind::vram)) {
        const auto& ps = std::get<peer_slot<B>>(st->slots);
        const auto& idx = ps.regions[static_cast<std::size_t>(mem_kind::vram)];
        if (!ps.peer || idx.empty()) {
          if (chosen == me)
            raise(status::not_found,
                  "prepare_view: entry {}: agent '{}' has no VRAM registered with {}", i, x.agent,
                  B::name);
          return;
        }
        const auto* e = idx.find_covering(x.range);
        if (e == nullptr) {
          if (chosen == me)
            raise(status::unknown,
                  "prepare_view: entry {} ({:#x}, {} bytes) is not inside a region agent '{}' "
                  "registered with {}",
                  i, x.range.addr, x.range.len, x.agent, B::name);
          return;
        }
        try {
          auto r = detail::views::reach<B>(*e->region, x.range);
          out[i] = {r.ptr, x.range.len};
          if (dev < 0) dev = r.device;
          if (r.keep) rec.keep.push_back(std::move(r.keep));
        } catch (const error& err) {
          if (chosen == me || err.status_code() != status::not_supported) throw;
          if (refusal.empty()) refusal = err.what();
          return;  // another backend may reach it
        }
        rec.pins.push_back(e->pin);
        chosen = me;
        done = true;
      }
    });
    if (!done) {
      if (!refusal.empty()) raise(status::not_supported, "{}", refusal);
      raise(status::not_found,
            "prepare_view: entry {} ({:#x}, {} bytes): no backend{} covers it among the regions "
            "agent '{}' registered",
            i, x.range.addr, x.range.len, opt.backends.empty() ? "" : " among those named",
            x.agent);
    }
  }
  if (chosen < 0)
    raise(status::not_found,
          "prepare_view: a backend capable of creating a list of remote memory descriptors was "
          "not found (every entry is a {} placeholder)",
          null_agent);
  rec.handle = detail::views::device_store::get().upload(dev < 0 ? 0 : dev,
                                                         device::abi::side_remote, kind, out);
  void* h = rec.handle;
  views_.push_back(std::move(rec));
  return h;
}

template <class... Backends>
bool agent<Backends...>::release_view(void* handle) noexcept {
  auto g = lock_.exclusive();
  for (auto it = views_.begin(); it != views_.end(); ++it)
    if (it->handle == handle) {
      views_.erase(it);  // its destructor marks the device copy released
      return true;
    }
  return false;
}

}  // namespace nixl
