#pragma once
/// A small client of PyTorch's c10d TCPStore (torch.distributed.TCPStore), the central store
/// NIXL selects with NIXL_TCPSTORE_ENDPOINT=host:port. It speaks both wire dialects: the current
/// one (VALIDATE handshake, PING; torch 2.x) and the legacy one of torch <= 1.13 (no handshake,
/// other query numbers), detected on the first connect. See docs/metadata-exchange.md.
///
/// Every reply is untrusted: lengths are bounded (max_value), counts and codes checked, every
/// wait has a deadline, and a failed operation closes the connection so that the next one
/// reconnects (a restarted store is picked up again).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace nixl::metadata {

/// host and port of NIXL_TCPSTORE_ENDPOINT.
struct tcpstore_endpoint {
  std::string host;
  std::uint16_t port = 0;
};

/// Splits "host:port" at the last ':' (no brackets for IPv6, as in NIXL). Throws
/// nixl::error(invalid_param) for an empty host or a port that is not 1..65535.
tcpstore_endpoint parse_tcpstore_endpoint(std::string_view endpoint);

/// NIXL's key of `agent`'s `label`: "nixl/agents/<label>/<agent>/NULL_AGENT" (on the wire the
/// client adds the leading '/', as torch's own client does).
std::string tcpstore_key(std::string_view label, std::string_view agent);

/// Largest value accepted from a store, as NIXL (1 GiB).
inline constexpr std::size_t tcpstore_max_value = std::size_t{1} << 30;

/// Blocking TCPStore requests, one at a time (not thread-safe). Keys are given as torch's
/// Python API takes them (without the leading '/').
///
/// Errors are nixl::error: status::remote_disconnect when the store cannot be reached or the
/// connection broke or timed out, status::mismatch when it answered something malformed
/// (bad length, bad code), status::invalid_param for arguments. Every message names the
/// endpoint and the request.
class tcpstore_client {
 public:
  enum class dialect : std::uint8_t { unknown, current, legacy };

  /// Nothing is connected yet; the first request connects. `op_timeout` bounds each request
  /// (connect and handshake included).
  tcpstore_client(std::string_view endpoint, std::chrono::milliseconds op_timeout,
                  std::size_t max_value = tcpstore_max_value);
  ~tcpstore_client();
  tcpstore_client(const tcpstore_client&) = delete;
  tcpstore_client& operator=(const tcpstore_client&) = delete;

  /// Connects now (no-op when connected), bounded by `budget`.
  void connect(std::chrono::milliseconds budget);
  /// Stores `value` under `key` (last writer wins); confirmed by a CHECK of the key.
  void set(std::string_view key, std::string_view value);
  /// CHECK then GET: the value, or nothing when the key is absent or empty.
  std::optional<std::string> get(std::string_view key);
  /// True when the key exists.
  bool check(std::string_view key);
  /// Deletes the key; true when it existed.
  bool remove(std::string_view key);
  /// Number of keys in the store.
  std::int64_t num_keys();

  bool connected() const noexcept;
  /// Closes the connection; the next request reconnects.
  void close() noexcept;
  /// Wire dialect found on the first successful connect.
  dialect protocol() const noexcept;
  /// "host:port" as configured.
  const std::string& endpoint() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace nixl::metadata
