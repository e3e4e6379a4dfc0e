#pragma once
// The LIBFABRIC backend's wire formats (src/wire.cpp), all on nixl::detail::codec: the
// connection info an agent publishes, the public data of a registered region, and the messages
// on rail 0 (notifications, heartbeats). Every byte from a peer is untrusted: lengths and
// counts are bounded, blobs carry a magic, a version and an FNV-1a checksum, and a bad blob
// throws nixl::error(mismatch) naming the field; a bad message is dropped.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/memory.hpp>

namespace nixl::libfabric::detail::wire {

constexpr std::uint32_t conn_magic = 0x464c584e;  // "NXLF"
constexpr std::uint32_t rkey_magic = 0x524c584e;  // "NXLR"
constexpr std::uint32_t msg_magic = 0x4d4c584e;   // "NXLM"
constexpr std::uint8_t conn_version = 1;
constexpr std::uint8_t rkey_version = 1;
constexpr std::uint8_t msg_version = 1;
constexpr std::size_t max_address_size = 1024;
constexpr std::size_t max_text_size = 256;

/// Message types on rail 0.
/// `abort`: an abort notice, in the notification's format (docs/error-model.md).
/// `bye`: the sender unloaded this agent's metadata and stops its heartbeats here: not an end
/// (header only).
enum class msg_type : std::uint8_t { notif = 1, ping = 2, pong = 3, abort = 4, bye = 5 };

/// What a peer's connection info says.
struct conn_record {
  std::uint64_t uid = 0;
  std::string_view provider;
  std::vector<std::string_view> domains;    ///< per rail
  std::vector<std::string_view> addresses;  ///< per rail, views into the blob
};

std::string encode_conn_info(std::uint64_t uid, std::string_view provider,
                             std::span<const std::string> domains,
                             std::span<const std::string> addresses);
/// Throws nixl::error(mismatch) naming `agent` and the bad field.
conn_record parse_conn_info(std::string_view agent, std::span<const std::byte> blob,
                            std::size_t max_rails);

/// What a peer's region data says.
struct rkey_record {
  mem_kind kind = mem_kind::dram;
  bool virt_addr = false;
  std::uint64_t base = 0;
  std::uint64_t len = 0;
  std::vector<std::uint64_t> keys;  ///< per rail of the peer
};

std::string encode_rkey(const rkey_record& r);
rkey_record parse_rkey(std::span<const std::byte> data, std::size_t max_rails);

/// A message header: magic, version, type, sender backend identity.
std::string encode_header(msg_type t, std::uint64_t uid);
constexpr std::size_t header_size = 4 + 1 + 1 + 8;

/// A received message, views into the bytes.
struct message {
  msg_type type = msg_type::notif;
  std::uint64_t uid = 0;
  // notif, abort; ping: the sender's agent name (empty from a sender that does not say it)
  std::string_view sender;
  std::string_view text;
  // ping / pong
  std::uint64_t token = 0;
  std::uint64_t seq = 0;
  std::string_view address;     ///< ping: where to answer
  std::uint32_t period_ms = 0;  ///< ping: the sender's heartbeat period; 0: not regular
};
/// Empty when the bytes are not a message of this format within the limits.
std::optional<message> parse_message(std::string_view data, std::size_t max_name,
                                     std::size_t max_text) noexcept;

/// Bodies after the header.
/// A ping: where to answer, then the sender's heartbeat period (0 when its pings are not
/// regular: no progress thread) and its agent name, by which the receiver watches it.
std::string encode_ping(std::uint64_t uid, std::uint64_t token, std::uint64_t seq,
                        std::string_view address, std::uint32_t period_ms, std::string_view sender);
std::string encode_pong(std::uint64_t uid, std::uint64_t token, std::uint64_t seq);

}  // namespace nixl::libfabric::detail::wire
