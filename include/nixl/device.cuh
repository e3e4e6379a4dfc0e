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

/// What a null handle reads as: no view (magic 0).
static __constant__ int4 no_view[2];

/// A view's header as one pair of 16-byte loads (a null handle reads as no view). The null
/// handle is swapped for `no_view` instead of branched around, so that the loads of both views'
/// headers leave together (a branch per header cost about 1% of a 16 MiB grid put).
struct head {
  std::uint32_t magic, state, side;
  std::uint64_t count;
};
__device__ inline head read_head(const abi::header* h) {
  const int4* p = h != nullptr ? reinterpret_cast<const int4*>(h) : no_view;
  const int4 a = p[0];
  const int4 b = p[1];
  return {static_cast<std::uint32_t>(a.x), static_cast<std::uint32_t>(a.y),
          static_cast<std::uint32_t>(b.x),
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.z)) |
              static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.w)) << 32};
}
template <class Side>
__device__ inline result check_head(const head& h, std::size_t i) {
  if (h.magic != abi::magic || h.side != Side::value) return result::bad_view;
  if (h.state != abi::state_live) return result::released;
  if (i >= h.count) return result::bad_index;
  return result::ok;
}
/// check_head's `ok`, as one condition.
template <class Side>
__device__ inline bool usable(const head& h, std::size_t i) {
  return (h.magic == abi::magic) & (h.side == Side::value) & (h.state == abi::state_live) &
         (i < h.count);
}
/// resolve's `ok`, as one condition.
__device__ inline bool fits(const abi::entry& e, std::size_t offset, std::size_t size) {
  return (e.ptr != 0) & (offset <= e.len) & (size <= e.len - offset);
}
/// Entry `i` of a view whose head check_head accepted, as one 16-byte load.
__device__ inline abi::entry read_entry(const abi::header* h, std::size_t i) {
  const int4 v = reinterpret_cast<const int4*>(h + 1)[i];
  return {static_cast<std::uint64_t>(static_cast<std::uint32_t>(v.x)) |
              static_cast<std::uint64_t>(static_cast<std::uint32_t>(v.y)) << 32,
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(v.z)) |
              static_cast<std::uint64_t>(static_cast<std::uint32_t>(v.w)) << 32};
}
/// The address of [offset, offset + size) of entry `e`, or why there is none.
__device__ inline result resolve(const abi::entry& e, std::size_t offset, std::size_t size,
                                 char*& out) {
  if (e.ptr == 0) return result::placeholder;
  if (offset > e.len || size > e.len - offset) return result::out_of_range;
  out = reinterpret_cast<char*>(e.ptr + offset);
  return result::ok;
}

/// The address of [offset, offset + size) of entry `i` of `v`, or why there is none.
template <class Side, class Kind>
__device__ inline result locate(view<Side, Kind> v, std::size_t i, std::size_t offset,
                                std::size_t size, char*& out) {
  if (result r = check_head<Side>(read_head(v.header), i); r != result::ok) return r;
  return resolve(read_entry(v.header, i), offset, size, out);
}

/// The group's copy in units of T, then the bytes past the last whole unit. The tail loop runs
/// only when there is a tail: unguarded, it cost about 1% of a 16 MiB grid put.
template <class T>
__device__ inline void copy_as(char* dst, const char* src, std::size_t n, unsigned rank,
                               unsigned width) {
  const std::size_t k = n / sizeof(T);
  for (std::size_t j = rank; j < k; j += width)
    reinterpret_cast<T*>(dst)[j] = reinterpret_cast<const T*>(src)[j];
  if (n % sizeof(T) != 0)
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
  // Both views' headers, then both entries, are read at once: two memory round trips before
  // the data moves instead of four (with one wave of blocks, each adds to the kernel's time).
  // Each pair of checks is one branch on the way to the data (`&`, not `&&`); which check
  // failed is worked out only after one did, source first.
  const impl::head hs = impl::read_head(src.header), hd = impl::read_head(dst.header);
  if (!(impl::usable<local_side>(hs, si) & impl::usable<remote_side>(hd, di))) {
    if (result r = impl::check_head<local_side>(hs, si); r != result::ok) return r;
    return impl::check_head<remote_side>(hd, di);
  }
  const abi::entry es = impl::read_entry(src.header, si), ed = impl::read_entry(dst.header, di);
  if (!(impl::fits(es, src_offset, size) & impl::fits(ed, dst_offset, size))) {
    char* unused = nullptr;
    if (result r = impl::resolve(es, src_offset, size, unused); r != result::ok) return r;
    return impl::resolve(ed, dst_offset, size, unused);
  }
  impl::copy<L>(reinterpret_cast<char*>(ed.ptr + dst_offset),
                reinterpret_cast<const char*>(es.ptr + src_offset), size);
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
  const impl::head h = impl::read_head(v.header);
  return h.magic == abi::magic && h.side == Side::value && h.state == abi::state_live ? h.count : 0;
}

}  // namespace nixl::device
