// Registration of VRAM and DRAM, and the public data of a region.

#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::cuda {

namespace detail {
namespace {

// DRAM pinned by this library, shared by every backend of the process

struct pin_entry {
  std::size_t len = 0;
  std::size_t refs = 0;
};

struct pin_table {
  std::mutex mu;
  std::map<std::uintptr_t, pin_entry> pins;  // by start address; ranges do not overlap
};

pin_table& pins() {
  static pin_table t;
  return t;
}

enum class pin_result { none, pinned, overlap };

// Pins the range (when `may_pin`: nobody pinned it and pinning is on), or takes a reference on the
// same range pinned here before. `overlap` when it overlaps a different range pinned here.
pin_result pin(std::uintptr_t addr, std::size_t len, bool may_pin) {
  auto& t = pins();
  std::lock_guard lk(t.mu);
  auto it = t.pins.upper_bound(addr);
  if (it != t.pins.begin()) {
    auto prev = std::prev(it);
    if (prev->first == addr && prev->second.len == len) {
      ++prev->second.refs;
      return pin_result::pinned;
    }
    if (prev->first + prev->second.len > addr) return pin_result::overlap;
  }
  if (it != t.pins.end() && it->first < addr + len) return pin_result::overlap;
  if (!may_pin) return pin_result::none;
  const cudaError_t e = clear_error(cudaHostRegister(
      reinterpret_cast<void*>(addr), len, cudaHostRegisterPortable | cudaHostRegisterMapped));
  if (e != cudaSuccess) {
    nixl::log::info(
        "CUDA backend: DRAM {:#x} + {} stays pageable (cudaHostRegister: {}); "
        "copies of it go through the copy engines, staged by the driver",
        addr, len, describe(e));
    return pin_result::none;
  }
  t.pins.emplace(addr, pin_entry{len, 1});
  return pin_result::pinned;
}

void unpin(std::uintptr_t addr, std::size_t len) noexcept {
  auto& t = pins();
  std::lock_guard lk(t.mu);
  auto it = t.pins.find(addr);
  if (it == t.pins.end() || it->second.len != len) return;
  if (--it->second.refs == 0) {
    (void)NIXL_CUDA_WARN(cudaHostUnregister(reinterpret_cast<void*>(addr)));
    t.pins.erase(it);
  }
}

}  // namespace
}  // namespace detail

backend::region backend::register_region(mem_kind kind, const nixl::reg_desc& d) {
  if (device_count() == 0)
    raise(status::not_supported, "CUDA backend: cannot register {} at {}: {}", kind,
          detail::hex(d.addr), no_device_reason());
  if (kind != mem_kind::vram && kind != mem_kind::dram)
    raise(status::not_supported, "CUDA backend: cannot register {} memory; it moves vram and dram",
          kind);
  if (d.len == 0 || d.addr == 0)
    raise(status::invalid_param,
          "CUDA backend: cannot register {} {} of length {}; give a "
          "non-null address and a length > 0",
          kind, detail::hex(d.addr), d.len);
  region r;
  r.kind = kind;
  r.addr = d.addr;
  r.len = d.len;
  const auto* p = reinterpret_cast<const void*>(d.addr);
  detail::region_record blob;
  blob.kind = kind;
  blob.addr = d.addr;
  blob.len = d.len;
  std::uintptr_t alloc_base = 0;
  std::size_t alloc_size = 0;

  if (kind == mem_kind::vram) {
    if (d.dev >= static_cast<std::uint64_t>(device_count()))
      raise(status::invalid_param,
            "CUDA backend: VRAM descriptor {} names GPU {}, but this process "
            "sees {} GPU(s); dev must be a CUDA device ordinal",
            detail::hex(d.addr), d.dev, device_count());
    const int dev = static_cast<int>(d.dev);
    detail::device_guard g(dev);
    cudaPointerAttributes a{};
    NIXL_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      raise(status::invalid_param,
            "CUDA backend: {} is not GPU memory (cudaPointerGetAttributes "
            "type {}); register host memory as DRAM",
            detail::hex(d.addr), static_cast<int>(a.type));
    if (a.type == cudaMemoryTypeDevice && a.device != dev)
      raise(status::invalid_param,
            "CUDA backend: {} lies on GPU {}, but the descriptor says dev {}", detail::hex(d.addr),
            a.device, dev);
    r.device = dev;
    r.access = d.addr;
    r.device_access = true;
    if (a.type == cudaMemoryTypeDevice) {
      detail::allocation_range(p, alloc_base, alloc_size);
      if (d.addr - alloc_base + d.len > alloc_size)
        raise(status::invalid_param,
              "CUDA backend: VRAM {} + {} bytes runs past the end of its "
              "allocation ({} + {}); register ranges inside one allocation",
              detail::hex(d.addr), d.len, detail::hex(alloc_base), alloc_size);
      cudaIpcMemHandle_t h{};
      const cudaError_t e =
          detail::clear_error(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(alloc_base)));
      if (e == cudaSuccess) {
        std::memcpy(blob.ipc_handle.data(), h.reserved, blob.ipc_handle.size());
        blob.flags |= detail::flag_ipc;
      } else {
        nixl::log::info(
            "CUDA backend: VRAM {} cannot be shared with other processes "
            "(cudaIpcGetMemHandle: {}); it serves this process only",
            detail::hex(d.addr), detail::describe(e));
      }
    } else {
      alloc_base = d.addr;
      alloc_size = d.len;
    }
    blob.gpu = detail::devices()[static_cast<std::size_t>(dev)].id;
  } else {
    cudaPointerAttributes a{};
    NIXL_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    if (a.type == cudaMemoryTypeDevice)
      raise(status::invalid_param, "CUDA backend: {} is GPU memory of GPU {}; register it as VRAM",
            detail::hex(d.addr), a.device);
    // Pinning is shared by every backend of the process (two agents may register the same
    // buffer): an exact range already pinned here gains a reference; a range overlapping one
    // pinned here stays unpinned and off the kernel path, since the other owner may unpin it.
    const detail::pin_result pr =
        detail::pin(d.addr, d.len, a.type == cudaMemoryTypeUnregistered && st_->cfg.pin_dram);
    r.pinned_here = pr == detail::pin_result::pinned;
    r.access = d.addr;
    std::uintptr_t dp = 0;
    if (pr != detail::pin_result::overlap && detail::host_device_pointer(p, dp)) {
      // Both ends must be pinned for kernels to reach the whole range.
      std::uintptr_t dp_end = 0;
      if (detail::host_device_pointer(reinterpret_cast<const char*>(p) + d.len - 1, dp_end) &&
          dp_end == dp + d.len - 1) {
        r.access = dp;
        r.device_access = true;
      }
    }
    if (r.device_access) blob.flags |= detail::flag_device_access;
    alloc_base = d.addr;
    alloc_size = d.len;
  }

  blob.offset = d.addr - alloc_base;
  blob.alloc_size = alloc_size;
  r.blob = detail::encode_region(blob);
  return r;
}

void backend::deregister_region(region& r) noexcept {
  if (r.pinned_here) {
    detail::unpin(r.addr, r.len);
    r.pinned_here = false;
  }
  r.device_access = false;
}

}  // namespace nixl::cuda
