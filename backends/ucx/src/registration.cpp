// The UCX backend's registration: registering and deregistering local memory, its public data,
// memory that UCX allocates, and the handles kept while UCX may still use them.

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx {
namespace detail {

bool engine::handles_in_use() noexcept {
  if (orphans_.load(std::memory_order_acquire) != 0) return true;
  // Per peer: a failed peer in mode none holds this agent's operations only while a request
  // to it is in flight (every put, get and flush UCX keeps ends through the request's slot).
  // A peer that failed with nothing in flight keeps nothing.
  bool in_use = false;
  slots_.for_each([&](const op_slot& s) {
    if (in_use || !s.busy()) return;
    const peer_state* p = s.peer.load(std::memory_order_relaxed);
    if (p != nullptr && !p->is_self && !p->ucx_peer_mode &&
        p->failed.load(std::memory_order_acquire))
      in_use = true;
  });
  return in_use;
}

std::size_t engine::kept_handles() noexcept {
  std::lock_guard lk(deferred_mu_);
  return deferred_memh_.size() + deferred_rkeys_.size();
}

template <class H>
void engine::defer_handles(std::vector<H>& list, std::span<H> handles) noexcept {
  // UCX 1.13 keeps an emulated put to a dead same-host peer queued on its shared-memory endpoint
  // until ucp_worker_destroy purges it; the purge then releases the operation's memory handle,
  // so a handle unmapped before that is used after free (SIGSEGV in ucp_mem_rereg_mds).
  if (handles_in_use()) {
    std::lock_guard lk(deferred_mu_);
    try {
      for (H& h : handles) list.push_back(std::move(h));
      return;
    } catch (...) {
      // out of memory: release the rest now rather than leak them
    }
  } else {
    drain_deferred(false);
  }
  for (H& h : handles) h = H{};
}

void engine::defer(mem_handle& m) noexcept {
  defer_handles(deferred_memh_, std::span(&m, 1));
}

void engine::defer(std::vector<rkey_handle>& rkeys) noexcept {
  defer_handles(deferred_rkeys_, std::span(rkeys));
  rkeys.clear();
}

void engine::drain_deferred(bool force) noexcept {
  if (!force && handles_in_use()) return;
  std::vector<mem_handle> memh;
  std::vector<rkey_handle> rkeys;
  {
    std::lock_guard lk(deferred_mu_);
    memh.swap(deferred_memh_);
    rkeys.swap(deferred_rkeys_);
  }
}

std::pair<void*, ucp_mem_h> engine::allocate(std::size_t bytes) {
  if (bytes == 0) raise(status::invalid_param, "UCX allocate: zero bytes; ask for at least one");
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                  UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = nullptr;
  mp.length = bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  NIXL_UCX_CHECK(ucp_mem_map(ctx_.get(), &mp, &memh), "allocate({} bytes)", bytes);
  ucp_mem_attr_t ma{};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  if (const ucs_status_t s = ucp_mem_query(memh, &ma); s != UCS_OK) {
    NIXL_UCX_WARN(ucp_mem_unmap(ctx_.get(), memh));
    throw_ucs(s, "ucp_mem_query", __FILE__, __LINE__, "allocate");
  }
  std::lock_guard lk(alloc_mu_);
  allocs_[reinterpret_cast<std::uintptr_t>(ma.address)] = {bytes, memh};
  return {ma.address, memh};
}

void engine::free_allocation(void* addr) noexcept {
  ucp_mem_h memh = nullptr;
  {
    std::lock_guard lk(alloc_mu_);
    auto it = allocs_.find(reinterpret_cast<std::uintptr_t>(addr));
    if (it == allocs_.end()) return;
    memh = it->second.second;
    allocs_.erase(it);
  }
  NIXL_UCX_WARN(ucp_mem_unmap(ctx_.get(), memh));
}

ucp_mem_h engine::allocation_of(std::uintptr_t addr, std::size_t len) noexcept {
  std::lock_guard lk(alloc_mu_);
  auto it = allocs_.upper_bound(addr);
  if (it == allocs_.begin()) return nullptr;
  --it;
  const std::uintptr_t base = it->first;
  const std::size_t size = it->second.first;
  return addr >= base && len <= size && addr - base <= size - len ? it->second.second : nullptr;
}
}  // namespace detail

backend::region backend::register_region(mem_kind kind, const reg_desc& d) {
  if (kind != mem_kind::dram && kind != mem_kind::vram)
    raise(status::not_supported,
          "UCX register_region: {} memory is not supported; UCX moves dram and vram",
          to_string(kind));
  if (kind == mem_kind::vram && !eng_->cuda_supported())
    raise(status::not_supported,
          "UCX register_region: cannot register vram at {:#x} (device {}): this UCX library ({}) "
          "reports no CUDA memory support; use a UCX built --with-cuda or nixl::cuda::backend",
          d.addr, d.dev, ucp_get_version_string());
  if (d.len == 0 || d.addr == 0)
    raise(status::invalid_param,
          "UCX register_region: empty region (addr {:#x}, len {}); register a non-null range",
          d.addr, d.len);
  region r;
  // Memory from allocate() is registered already (and mapped through shared memory).
  ucp_mem_h memh = kind == mem_kind::dram ? eng_->allocation_of(d.addr, d.len) : nullptr;
  if (memh != nullptr) {
    r.memh = detail::mem_handle::borrowed(memh);
  } else {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = reinterpret_cast<void*>(d.addr);
    mp.length = d.len;
    if (kind == mem_kind::vram) {
      mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
      mp.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    NIXL_UCX_CHECK(ucp_mem_map(eng_->context(), &mp, &memh), "register_region({:#x}, {} bytes)",
                   d.addr, d.len);
    r.memh = detail::mem_handle(eng_->context(), memh);
  }
  r.range = d;
  r.kind = kind;
  void* packed = nullptr;
  std::size_t packed_len = 0;
  NIXL_UCX_CHECK(ucp_rkey_pack(eng_->context(), memh, &packed, &packed_len),
                 "register_region({:#x}, {} bytes)", d.addr, d.len);
  // VRAM: its CUDA IPC export too, for the driver copies of host memory in other processes of
  // this host (host_vram_copy=cuda) where UCX cannot map it there.
  std::optional<detail::ipc_export> ipc;
  if (NIXL_UCX_WITH_CUDA != 0 && kind == mem_kind::vram && eng_->cfg().cuda_host_vram)
    ipc = detail::gpu::export_vram(d.addr, d.len, d.dev);
  r.ipc = ipc;
  try {
    r.public_data = detail::wire::encode_rkey(
        kind, std::string_view(static_cast<const char*>(packed), packed_len),
        ipc ? &*ipc : nullptr);
  } catch (...) {
    ucp_rkey_buffer_release(packed);
    throw;
  }
  ucp_rkey_buffer_release(packed);
  if (kind == mem_kind::dram && eng_->runs_host_copies()) eng_->add_host_region(d.addr, d.len);
  return r;
}

void backend::deregister_region(region& r) noexcept {
  // pinned for DRAM <-> VRAM copies by any backend of this process (host_vram_copy=cuda)
  if (r.kind == mem_kind::dram) {
    eng_->remove_host_region(r.range.addr, r.range.len);
    detail::gpu::unpin_range(r.range.addr, r.range.len);
  }
  eng_->defer(r.memh);
}

std::string backend::public_data(const region& r) const {
  return r.public_data;
}

memory backend::allocate(std::size_t bytes) {
  auto [addr, memh] = eng_->allocate(bytes);
  return memory(eng_.get(), addr, bytes);
}

memory::~memory() {
  if (eng_ != nullptr && addr_ != nullptr) eng_->free_allocation(addr_);
}

}  // namespace nixl::ucx
