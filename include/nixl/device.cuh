#pragma once
/// nixl-cpp's device API: GPU-initiated puts and atomic adds through memory views that an agent
/// prepared on the host (`nixl::agent::prepare_view`, NIXL's prepMemView). A view is a
/// device-resident array of resolved pointers (nixl/device/abi.hpp): a put is a copy through
/// those pointers (the peer's VRAM mapped here through CUDA IPC, or the peer's own pointer when
/// it is an agent of this process), an atomic add a system-scope atomic on the mapped counter.
/// Both complete before they return; nothing is posted anywhere.
///
/// Levels: `thread` (the calling thread alone), `warp` (all 32 lanes call with the same
/// arguments and copy cooperatively) and `block` (every thread of the block does). A bad view,
/// an index past the view's end, a placeholder entry or a range past an entry's end is an
/// error result, never an access: views carry their side in their type and their bounds in the
/// device copy, and a released view's header says so.
///
/// Compiles as CUDA C++17 (NIXL's clients) and C++20. NIXL's face of it is nixl_device.cuh.

#include <cstddef>
#include <cstdint>

#include <nixl/device/abi.hpp>

namespace nixl::device {

/// Which threads take part in one operation (NIXL's nixl_gpu_level_t values).
enum class level : std::uint64_t { thread = 0, warp = 1, block = 2 };

/// What an operation did: `ok`, or why it did nothing.
enum class result : int {
  ok = 0,
  bad_view = 1,      ///< null, not a view, or a view of the other side
  released = 2,      ///< the view was released
  bad_index = 3,     ///< index past the view's last entry
  placeholder = 4,   ///< the entry is a NULL_AGENT placeholder
  out_of_range = 5,  ///< offset + size past the entry's end
  misaligned = 6,    ///< an atomic counter not on an 8-byte boundary
};

/// Side tags of a view's type.
struct local_side {
  static constexpr std::uint32_t value = abi::side_local;
};
struct remote_side {
  static constexpr std::uint32_t value = abi::side_remote;
};
/// The memory kind views are of (the host side only makes views of VRAM).
struct vram {};

/// A view as a kernel argument: trivially copyable, built from a host handle.
template <class Side, class Kind = vram>
struct view {
  const abi::header* header = nullptr;

  view() = default;
  __host__ __device__ explicit view(const void* handle) noexcept
      : header(static_cast<const abi::header*>(handle)) {}
  __host__ __device__ const void* handle() const noexcept { return header; }
};
using local_view = view<local_side>;
using remote_view = view<remote_side>;

namespace impl {

template <level L>
__device__ inline void group(unsigned& rank, unsigned& width) {
  const unsigned tid =
      threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
  if constexpr (L == level::thread) {
    rank = 0;
    width = 1;
  } else if constexpr (L == level::warp) {
    rank = tid % 32u;
    width = 32u;
  } else {
    rank = tid;
    width = blockDim.x * blockDim.y * blockDim.z;
  }
}

template <level L>
__device__ inline void sync() {
  if constexpr (L == level::warp) __syncwarp();
  if constexpr (L == level::block) __syncthreads();
}

/// The address of [offset, offset + size) of entry `i` of `v`, or why there is none.
template <class Side, class Kind>
__device__ inline result locate(view<Side, Kind> v, std::size_t i, std::size_t offset,
                                std::size_t size, char*& out) {
  const abi::header* h = v.header;
  if (h == nullptr || h->magic != abi::magic || h->side != Side::value) return result::bad_view;
  if (h->state != abi::state_live) return result::released;
  if (i >= h->count) return result::bad_index;
  const abi::entry e = reinterpret_cast<const abi::entry*>(h + 1)[i];
  if (e.ptr == 0) return result::placeholder;
  if (offset > e.len || size > e.len - offset) return result::out_of_range;
  out = reinterpret_cast<char*>(e.ptr + offset);
  return result::ok;
}

template <class T>
__device__ inline void copy_as(char* dst, const char* src, std::size_t n, unsigned rank,
                               unsigned width) {
  const std::size_t k = n / sizeof(T);
  for (std::size_t j = rank; j < k; j += width)
    reinterpret_cast<T*>(dst)[j] = reinterpret_cast<const T*>(src)[j];
  for (std::size_t j = k * sizeof(T) + rank; j < n; j += width) dst[j] = src[j];
}

/// The group's cooperative copy: 16-byte accesses when both ends allow, else 8, 4 or 1.
template <level L>
__device__ inline void copy(char* dst, const char* src, std::size_t n) {
  unsigned rank = 0, width = 1;
  group<L>(rank, width);
  const auto a = reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src);
  if ((a & 15u) == 0)
    copy_as<int4>(dst, src, n, rank, width);
  else if ((a & 7u) == 0)
    copy_as<unsigned long long>(dst, src, n, rank, width);
  else if ((a & 3u) == 0)
    copy_as<unsigned>(dst, src, n, rank, width);
  else
    copy_as<char>(dst, src, n, rank, width);
  sync<L>();
}

}  // namespace impl

/// Copies `size` bytes from entry `si` of `src` at `src_offset` to entry `di` of `dst` at
/// `dst_offset`; the data is in place (visible to the peer once it synchronises) on `ok`.
template <level L = level::thread, class Kind>
__device__ inline result put(view<local_side, Kind> src, std::size_t si, std::size_t src_offset,
                             view<remote_side, Kind> dst, std::size_t di, std::size_t dst_offset,
                             std::size_t size) {
  char* s = nullptr;
  char* d = nullptr;
  if (result r = impl::locate(src, si, src_offset, size, s); r != result::ok) return r;
  if (result r = impl::locate(dst, di, dst_offset, size, d); r != result::ok) return r;
  impl::copy<L>(d, s, size);
  return result::ok;
}

/// Adds `value` to the 64-bit counter at `offset` of entry `i` of `counter`: one system-scope
/// atomic by the group's first thread, after the group's earlier writes are visible; then the
/// group synchronises.
template <level L = level::thread, class Kind>
__device__ inline result atomic_add(std::uint64_t value, view<remote_side, Kind> counter,
                                    std::size_t i, std::size_t offset) {
  char* p = nullptr;
  if (result r = impl::locate(counter, i, offset, sizeof(std::uint64_t), p); r != result::ok)
    return r;
  if ((reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) return result::misaligned;
  unsigned rank = 0, width = 1;
  impl::group<L>(rank, width);
  impl::sync<L>();  // the group's writes first
  if (rank == 0) {
    __threadfence_system();
    atomicAdd_system(reinterpret_cast<unsigned long long*>(p),
                     static_cast<unsigned long long>(value));
    __threadfence_system();
  }
  impl::sync<L>();
  return result::ok;
}

/// Where entry `i` of `v` starts in this process (a direct store target), or null for a bad
/// view or index, a released view or a placeholder.
template <class Side, class Kind>
__device__ inline void* get_ptr(view<Side, Kind> v, std::size_t i) {
  char* p = nullptr;
  return impl::locate(v, i, 0, 0, p) == result::ok ? p : nullptr;
}

/// Number of entries of a live view (0 for a bad or released one).
template <class Side, class Kind>
__device__ inline std::size_t size(view<Side, Kind> v) {
  const abi::header* h = v.header;
  if (h == nullptr || h->magic != abi::magic || h->side != Side::value ||
      h->state != abi::state_live)
    return 0;
  return h->count;
}

}  // namespace nixl::device
