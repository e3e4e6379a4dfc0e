#pragma once
// The CUDA backend's wire format: connection info and region public data, written and read with
// the core's codec (nixl::detail::writer / reader). Every byte comes from a peer and is checked:
// sizes before reading, counts and lengths against their limits. Layouts: docs/cuda.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/detail/host_identity.hpp>
#include <nixl/memory.hpp>

namespace nixl::cuda::detail {

inline constexpr std::uint32_t conn_magic = 0x4343584e;    // "NXCC"
inline constexpr std::uint32_t region_magic = 0x5243584e;  // "NXCR"
inline constexpr std::uint8_t wire_version = 2;
inline constexpr std::size_t max_socket_name = 100;  // fits sockaddr_un's sun_path after the NUL

/// What a peer's connection info says.
struct conn_record {
  nixl::detail::host_identity owner;
  std::string socket;
};

/// u32 magic, u8 version, the host identity (nixl::detail::host_identity::encode), the name of
/// the notification socket (u32 length, bytes).
std::string encode_connection_info(const nixl::detail::host_identity& me, std::string_view socket);
/// Throws `nixl::error`: `invalid_param` for malformed bytes (the message says which field and
/// where), `mismatch` for another wire version.
conn_record decode_connection_info(std::string_view agent, std::span<const std::byte> info);

inline constexpr std::uint8_t flag_ipc = 1;            // `ipc_handle` is valid
inline constexpr std::uint8_t flag_device_access = 2;  // DRAM that GPUs reach (pinned, mapped)
inline constexpr std::size_t ipc_handle_size = 64;
inline constexpr std::size_t region_blob_size = 8 + 16 + 4 * 8 + ipc_handle_size;
static_assert(region_blob_size == 120, "the layout of docs/cuda.md");

/// What a region's public data says.
struct region_record {
  mem_kind kind = mem_kind::dram;
  std::uint8_t flags = 0;
  uuid gpu{};
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  std::uint64_t offset = 0;      // of `addr` inside its allocation
  std::uint64_t alloc_size = 0;  // of that allocation
  std::array<char, ipc_handle_size> ipc_handle{};
};

/// u32 magic, u8 version, kind, flags, a 0 byte, GPU UUID, address, length, offset, allocation
/// size (u64 each), IPC handle: `region_blob_size` bytes. Whose region it is (host, process)
/// is the peer's identity, from its connection info.
std::string encode_region(const region_record& r);
/// Throws `nixl::error(invalid_param)` for malformed bytes, `mismatch` when the record does not
/// describe the descriptor `d` of kind `kind` it came with.
region_record decode_region(std::string_view agent, mem_kind kind, const nixl::desc& d,
                            std::span<const std::byte> data);

}  // namespace nixl::cuda::detail
