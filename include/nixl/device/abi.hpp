#pragma once
/// The device-resident layout of a memory view, shared by the host code that builds views
/// (nixl/agent/views.hpp) and the device functions that read them (nixl/device.cuh and NIXL's
/// nixl_device.cuh). A view is one allocation in the GPU memory of the device its entries live
/// on: a header, then one `entry` per descriptor of the list the view was prepared from. The
/// pointers are resolved on the host: this process's own VRAM address for local entries, and
/// for a peer's entries the address at which this process reaches them (the peer's own pointer
/// when it is an agent of this process, its CUDA IPC mapping here when it is another process of
/// this host). A view handle (NIXL's `nixlMemViewH`) is the header's address.

#include <cstdint>

namespace nixl::device::abi {

inline constexpr std::uint32_t magic = 0x4e58564du;  // "NXVM"

/// The header's state: a released view stays readable (its header is kept for a while, see
/// nixl/detail/device_views.hpp), so that a kernel handed a released handle gets an error.
enum : std::uint32_t { state_live = 1, state_released = 2 };

/// Which side of a transfer the view's entries are.
enum : std::uint32_t { side_local = 0, side_remote = 1 };

/// One entry: where it starts in this process's address space and how many bytes it holds.
/// `ptr == 0` marks a placeholder (NIXL's NULL_AGENT entry of a remote list).
struct entry {
  std::uint64_t ptr;
  std::uint64_t len;
};

struct header {
  std::uint32_t magic;
  std::uint32_t state;
  std::uint64_t count;  ///< entries that follow the header
  std::uint32_t side;
  std::uint32_t kind;  ///< nixl::mem_kind of the entries
  std::uint64_t reserved;
};
static_assert(sizeof(header) == 32 && sizeof(entry) == 16);

inline entry* entries(header* h) noexcept {
  return reinterpret_cast<entry*>(h + 1);
}

}  // namespace nixl::device::abi
