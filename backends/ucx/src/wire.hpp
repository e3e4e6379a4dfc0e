#pragma once
// The UCX backend's wire formats (src/wire.cpp), all on nixl::detail::codec: the connection
// info an agent publishes, the public data of a registered region, and the header of a
// notification. Every byte from a peer is untrusted: lengths and counts are bounded, blobs
// carry a magic, a version and an FNV-1a checksum, and a bad blob throws
// nixl::error(mismatch) naming the field.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/backends/ucx/detail/gpu.hpp>
#include <nixl/detail/host_identity.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::ucx::detail::wire {

constexpr std::uint32_t conn_magic = 0x4355584e;  // "NXUC"
constexpr std::uint32_t rkey_magic = 0x5255584e;  // "NXUR"
// Connection info: 2 added the IPC and network namespaces, 3 the host identity of
// nixl/detail/host_identity.hpp (host name, process token) and the FNV-1a offset basis fix, 4
// the flag that the backend runs host copies for its peers (copy requests below), 5 the flag
// that it runs a progress thread (and a copy request's events flag, read by every peer of 5).
constexpr std::uint8_t conn_version = 5;
// Region data: 2 is the FNV-1a offset basis fix, 3 added the CUDA IPC export of VRAM.
constexpr std::uint8_t rkey_version = 3;
constexpr std::uint8_t notif_version = 1;
constexpr std::size_t max_address_size = 64 * 1024;
constexpr std::size_t max_rkey_size = 64 * 1024;
constexpr std::size_t max_remote_workers = 1024;

/// What a peer's connection info says.
struct conn_record {
  nixl::detail::host_identity id;
  std::uint64_t uid = 0;                    ///< the peer's backend among those of its process
  std::vector<std::string_view> addresses;  ///< UCX worker addresses, views into the blob
  bool host_copies = false;      ///< runs copy requests (its host memory <-> a peer's VRAM)
  bool progress_thread = false;  ///< progresses its workers by itself (a progress thread)
};

std::string encode_conn_info(const nixl::detail::host_identity& id, std::uint64_t uid,
                             std::span<const std::string> addresses, bool host_copies,
                             bool progress_thread);
/// Throws nixl::error(mismatch) naming `agent` and the bad field.
conn_record parse_conn_info(std::string_view agent, std::string_view blob);

/// What a peer's region data says: the kind of memory and the packed UCX remote key.
struct rkey_record {
  mem_kind kind = mem_kind::dram;
  std::string_view packed;        ///< a view into the blob
  std::optional<ipc_export> ipc;  ///< VRAM: the allocation's CUDA IPC handle, when it has one
};

std::string encode_rkey(mem_kind kind, std::string_view packed, const ipc_export* ipc = nullptr);
rkey_record parse_rkey(std::span<const std::byte> data);

/// A copy request: a peer on this host asks the backend to copy between the backend's own
/// registered host memory and the peer's VRAM (opened here from its CUDA IPC handle), because
/// CUDA cannot map this process's host memory there. `to_host`: the peer's VRAM -> this
/// process's host memory (the peer's WRITE), else the other way (its READ).
constexpr std::uint8_t copy_version = 1;
constexpr std::uint32_t max_copy_entries = 1u << 20;
struct copy_entry {
  std::array<char, 64> handle{};
  std::array<char, 16> uuid{};
  std::uint64_t vram_offset = 0;  ///< in the peer's allocation
  std::uint64_t alloc_len = 0;    ///< of the peer's allocation, as it says
  std::uint64_t host_addr = 0;    ///< in this process
  std::uint64_t len = 0;
};
struct copy_request {
  std::uint64_t token = 0;
  bool to_host = false;
  /// Answer as soon as the copies are issued, with the events recorded after them, instead of
  /// after they ended.
  bool events = false;
  std::vector<copy_entry> entries;
};
/// Without the token (written at post by `set_copy_token`).
std::string encode_copy_request(bool to_host, std::span<const copy_entry> entries, bool events);
void set_copy_token(std::string& msg, std::uint64_t token) noexcept;
/// Throws nixl::error(mismatch) naming the bad field.
copy_request parse_copy_request(std::string_view data);
/// A copy request's answer: `success` with events means issued (they end when the events say),
/// without events done.
struct copy_ack {
  std::uint64_t token = 0;
  status st = status::backend;
  ipc_events events;
};
std::string encode_copy_ack(std::uint64_t token, status st, const ipc_events* events = nullptr);
/// Empty when the bytes are not an answer of this format (events only with success).
std::optional<copy_ack> parse_copy_ack(std::string_view data) noexcept;

/// The prefix of every notification an agent sends: version, sender name.
std::string notif_prefix(std::string_view agent);

/// A received notification: sender and message, views into the received bytes.
struct notif_record {
  std::string_view sender;
  std::string_view message;
};
/// Empty when the bytes are not a notification of this format within the limits.
std::optional<notif_record> parse_notif(std::string_view data, std::size_t max_name,
                                        std::size_t max_message) noexcept;

/// A beat (engine::beat_am_id): the notification format, the sender's beat period in ms (u32)
/// as the message; period 0 is a bye. `prefix`: the sender's notif_prefix.
std::string encode_beat(std::string_view prefix, std::uint32_t period_ms);
struct beat_record {
  std::string_view sender;
  std::uint32_t period_ms = 0;
};
/// Empty when the bytes are not a beat of this format within the limits.
std::optional<beat_record> parse_beat(std::string_view data, std::size_t max_name) noexcept;

}  // namespace nixl::ucx::detail::wire
