#pragma once
/// A small etcd v3 client over the JSON gateway (HTTP + JSON, keys and values base64-encoded),
/// built on libcurl. It covers what the metadata exchange needs: put/get/delete, leases and
/// streaming watches. See docs/metadata-exchange.md for why this route was chosen over gRPC.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nixl::metadata {

/// One key-value pair.
struct etcd_kv {
  std::string key;
  std::string value;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

/// Result of a range request: the pairs found and the store revision it was served at.
struct etcd_range {
  std::vector<etcd_kv> kvs;
  std::int64_t revision = 0;
};

/// One watch event.
struct etcd_event {
  enum class kind : std::uint8_t { put, del };
  kind type = kind::put;
  std::string key;
  std::string value;
  std::int64_t revision = 0;
};

/// Blocking etcd requests; one request at a time per client (not thread-safe).
/// Every call throws nixl::error(backend) naming the endpoint, the request and etcd's message.
class etcd_client {
 public:
  /// `endpoints`: comma-separated, "http://host:port" or "host:port". Requests go to the first
  /// endpoint that answers.
  etcd_client(std::string_view endpoints, std::chrono::milliseconds timeout);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  /// Grants a lease; returns its id.
  std::int64_t lease_grant(std::chrono::seconds ttl);
  /// Refreshes a lease; returns its remaining TTL in seconds, 0 when the lease is gone.
  std::int64_t lease_keepalive(std::int64_t id);
  /// Revokes a lease, deleting its keys.
  void lease_revoke(std::int64_t id);
  /// Stores a value (attached to `lease` when non-zero); returns the new revision.
  std::int64_t put(std::string_view key, std::string_view value, std::int64_t lease = 0);
  /// Reads one key.
  etcd_range get(std::string_view key);
  /// Reads every key that starts with `prefix`.
  etcd_range get_prefix(std::string_view prefix);
  /// Deletes every key that starts with `prefix`; returns how many were deleted.
  std::int64_t delete_prefix(std::string_view prefix);
  /// Answers whether an endpoint responds.
  bool healthy() noexcept;

  /// The endpoint requests currently go to.
  const std::string& endpoint() const noexcept;
  /// All endpoints, normalised to "http://host:port".
  const std::vector<std::string>& endpoints() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Streaming watches of keys or prefixes, all driven by the thread that calls poll().
/// watch/cancel/poll must be called from one thread; wakeup() from any.
class etcd_watcher {
 public:
  using id = std::uint64_t;

  etcd_watcher(std::string endpoint, std::chrono::milliseconds connect_timeout);
  ~etcd_watcher();
  etcd_watcher(const etcd_watcher&) = delete;
  etcd_watcher& operator=(const etcd_watcher&) = delete;

  /// Starts watching `key` (or every key under it with `prefix`) from `start_revision`
  /// (0: from now).
  id watch(std::string_view key, bool prefix, std::int64_t start_revision);
  /// Stops a watch; unknown ids are ignored.
  void cancel(id w) noexcept;
  /// Number of active watches.
  std::size_t size() const noexcept;
  /// Endpoint of the watches started from now on (after a fail-over of the client).
  void set_endpoint(std::string_view endpoint);
  const std::string& endpoint() const noexcept;

  struct update {
    id watch = 0;
    std::optional<etcd_event> event;  // empty: the stream ended or failed (see error)
    std::string error;
  };
  /// Runs I/O for at most `timeout` (less when an event arrives or wakeup() is called) and
  /// appends what happened. A failed stream is reported once and removed.
  void poll(std::chrono::milliseconds timeout, std::vector<update>& out);
  /// Makes a concurrent poll() return early. Thread-safe.
  void wakeup() noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Base64 (RFC 4648, with padding), as the JSON gateway encodes bytes.
std::string base64_encode(std::string_view in);
/// Decodes base64; throws nixl::error(invalid_param) on malformed input.
std::string base64_decode(std::string_view in);

}  // namespace nixl::metadata
