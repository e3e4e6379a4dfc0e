#pragma once
/// The parameters of the object store backends: `nixl::obj::config` ("OBJ", S3 and S3-compatible
/// stores) and `nixl::azure_blob::config` ("AZURE_BLOB"), both over `http_config`, the
/// settings of the shared HTTP layer.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <nixl/memory.hpp>

namespace nixl::obj {

/// The shared HTTP layer's settings (same names for both backends):
///  - `max_inflight` (64): HTTP requests in flight per backend; more wait in a queue.
///  - `max_connections` (32): connections kept open to the endpoint (reused across requests).
///  - `max_retries` (4): further attempts after a 5xx, a throttling answer (429, 503 SlowDown)
///    or a transport error, with exponential back-off from `retry_backoff_ms` (50) up to
///    `retry_backoff_max_ms` (2000), never past the deadline.
///  - `request_timeout_ms` (30000): the deadline of every HTTP request, retries included.
///  - `connect_timeout_ms` (5000): the limit of one connection attempt.
///  - `ca_bundle`: a CA file for TLS; `verify_tls` (true).
///  - `multipart_threshold` (NIXL's `crtMinLimit`, 16 MiB, at least 5 MiB): objects larger than
///    this are written in parts of `part_size` (8 MiB, at least 5 MiB) and read with parallel
///    ranged GETs of that size.
///  - `vram_staging_bytes` (64 MiB): the pinned host memory through which VRAM descriptors go
///    (one pool per backend, allocated on the first VRAM registration, reused by every
///    request); at least the largest HTTP body, max(`multipart_threshold`, `part_size`).
///  - `num_threads`: accepted for NIXL compatibility; one thread drives all requests (curl multi).
struct http_config {
  unsigned max_inflight = 64;
  unsigned max_connections = 32;
  unsigned max_retries = 4;
  std::chrono::milliseconds retry_backoff{50};
  std::chrono::milliseconds retry_backoff_max{2000};
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds connect_timeout{5000};
  std::string ca_bundle;
  bool verify_tls = true;
  std::size_t multipart_threshold = 16u << 20;
  std::size_t part_size = 8u << 20;
  std::size_t vram_staging_bytes = 64u << 20;
};

/// "OBJ" (S3). Parameters with NIXL's names; the AWS environment variables fill what is not given:
///  - `access_key` (AWS_ACCESS_KEY_ID), `secret_key` (AWS_SECRET_ACCESS_KEY), `session_token`
///    (AWS_SESSION_TOKEN);
///  - `bucket` (AWS_DEFAULT_BUCKET): required;
///  - `endpoint_override` (AWS_ENDPOINT_OVERRIDE): "host[:port]" or "http(s)://host[:port]";
///    default "s3.<region>.amazonaws.com";
///  - `scheme` (https), `region` (AWS_REGION, AWS_DEFAULT_REGION, else us-east-1),
///    `use_virtual_addressing` (false: path-style "/<bucket>/<key>");
///  - `unsigned_payload` (false): sign "UNSIGNED-PAYLOAD" instead of the body's SHA-256 (only
///    over https on AWS);
///  - `req_checksum`, `resp_checksum`, `throughput_target_gbps`: accepted, not used;
///  - and every `http_config` parameter.
struct config {
  std::string access_key, secret_key, session_token;
  std::string bucket;
  std::string endpoint;  // host[:port], without the scheme
  std::string scheme = "https";
  std::string region = "us-east-1";
  bool virtual_addressing = false;
  bool unsigned_payload = false;
  http_config http;

  /// Parses NIXL-style params; throws `nixl::error(invalid_param)` naming a bad value or a
  /// missing bucket.
  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::obj

namespace nixl::azure_blob {

/// Azure's storage emulator (azurite) accepts this account and key only: they are public.
inline constexpr std::string_view development_account = "devstoreaccount1";
inline constexpr std::string_view development_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// "AZURE_BLOB". Parameters (Azure's names; the environment fills what is not given):
///  - `connection_string` (AZURE_STORAGE_CONNECTION_STRING): "AccountName=..;AccountKey=..;
///    BlobEndpoint=..;DefaultEndpointsProtocol=.." (any subset; the keys below win), or
///    "UseDevelopmentStorage=true[;DevelopmentStorageProxyUri=http://host]" for azurite:
///    `development_account` and `development_key` at "http://127.0.0.1:10000/devstoreaccount1"
///    (an `account_url` or the string's `BlobEndpoint` names another port);
///  - `account_name` (AZURE_STORAGE_ACCOUNT), `account_key` (AZURE_STORAGE_KEY, base64);
///  - `container_name`: required, by Azure's rule (3-63 of a-z, 0-9 and single hyphens);
///  - `account_url`: "http(s)://host[:port][/<account>]"; default
///    "https://<account>.blob.core.windows.net". A path after the host (azurite's
///    "http://127.0.0.1:10000/devstoreaccount1") makes requests path-style;
///  - and every `obj::http_config` parameter.
struct config {
  std::string account_name;
  std::string account_key;  // base64, as Azure shows it
  std::string container;
  std::string scheme = "https";
  std::string host;         // host[:port]
  std::string path_prefix;  // "/<account>" for path-style endpoints, else empty
  obj::http_config http;

  static config from_params(const nixl::params&);
  nixl::params to_params() const;
};

}  // namespace nixl::azure_blob
