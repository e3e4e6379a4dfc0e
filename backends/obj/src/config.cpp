// Parameters of OBJ and AZURE_BLOB (config.hpp), with the environment filling what is not given.

#include <nixl/backends/obj/config.hpp>

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>
#include <nixl/detail/params.hpp>
#include <nixl/status.hpp>

namespace nixl::obj {
namespace {

using nixl::detail::parse_bool;
using nixl::detail::parse_number;

std::string param_or_env(const nixl::params& p, std::string_view key,
                         std::initializer_list<const char*> envs, std::string dflt = {}) {
  if (auto it = p.find(key); it != p.end() && !it->second.empty()) return it->second;
  for (const char* e : envs)
    if (const char* v = std::getenv(e); v != nullptr && *v != '\0') return v;
  return dflt;
}

/// Splits "http://host:port/path" into scheme, host[:port] and path (no trailing '/').
void split_url(std::string_view who, std::string_view key, std::string_view url,
               std::string& scheme, std::string& host, std::string* path) {
  if (auto p = url.find("://"); p != std::string_view::npos) {
    scheme = std::string(url.substr(0, p));
    url.remove_prefix(p + 3);
  }
  if (scheme != "http" && scheme != "https")
    raise(status::invalid_param, "{} parameter {}='{}': scheme must be http or https", who, key,
          url);
  const auto slash = url.find('/');
  host = std::string(url.substr(0, slash));
  std::string rest =
      slash == std::string_view::npos ? std::string{} : std::string(url.substr(slash));
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (host.empty() || host.find_first_of(" \r\n?#@") != std::string::npos)
    raise(status::invalid_param, "{} parameter {}='{}': give host[:port], e.g. 127.0.0.1:9000", who,
          key, url);
  if (path != nullptr)
    *path = rest;
  else if (!rest.empty())
    raise(status::invalid_param, "{} parameter {}='{}': no path expected after the host", who, key,
          url);
}

void parse_http(std::string_view who, const nixl::params& p, http_config& h) {
  auto num = [&](std::string_view key, std::uint64_t lo, std::uint64_t hi,
                 std::uint64_t dflt) -> std::uint64_t {
    auto it = p.find(key);
    return it == p.end() ? dflt : parse_number(who, key, it->second, lo, hi);
  };
  h.max_inflight = static_cast<unsigned>(num("max_inflight", 1, 4096, h.max_inflight));
  h.max_connections = static_cast<unsigned>(num("max_connections", 1, 4096, h.max_connections));
  h.max_retries = static_cast<unsigned>(num("max_retries", 0, 100, h.max_retries));
  h.retry_backoff = std::chrono::milliseconds(
      num("retry_backoff_ms", 1, 600000, static_cast<std::uint64_t>(h.retry_backoff.count())));
  h.retry_backoff_max = std::chrono::milliseconds(num(
      "retry_backoff_max_ms", 1, 600000, static_cast<std::uint64_t>(h.retry_backoff_max.count())));
  h.request_timeout = std::chrono::milliseconds(
      num("request_timeout_ms", 1, 3600000, static_cast<std::uint64_t>(h.request_timeout.count())));
  h.connect_timeout = std::chrono::milliseconds(
      num("connect_timeout_ms", 1, 600000, static_cast<std::uint64_t>(h.connect_timeout.count())));
  constexpr std::uint64_t floor = 5u << 20;
  std::uint64_t thr = h.multipart_threshold;
  if (auto it = p.find("crtMinLimit"); it != p.end())
    thr = parse_number(who, "crtMinLimit", it->second, 0, 1ull << 40);
  if (auto it = p.find("multipart_threshold"); it != p.end())
    thr = parse_number(who, "multipart_threshold", it->second, 0, 1ull << 40);
  h.multipart_threshold = static_cast<std::size_t>(std::max(thr, floor));
  h.part_size = static_cast<std::size_t>(num("part_size", floor, 5ull << 30, h.part_size));
  h.vram_staging_bytes =
      static_cast<std::size_t>(num("vram_staging_bytes", 4096, 1ull << 40, h.vram_staging_bytes));
  if (auto it = p.find("ca_bundle"); it != p.end()) h.ca_bundle = it->second;
  if (auto it = p.find("verify_tls"); it != p.end())
    h.verify_tls = parse_bool(who, "verify_tls", it->second);
  if (auto it = p.find("num_threads"); it != p.end())
    (void)parse_number(who, "num_threads", it->second, 0, 4096);
}

void put_http(const http_config& h, nixl::params& p) {
  p["max_inflight"] = std::to_string(h.max_inflight);
  p["max_connections"] = std::to_string(h.max_connections);
  p["max_retries"] = std::to_string(h.max_retries);
  p["retry_backoff_ms"] = std::to_string(h.retry_backoff.count());
  p["retry_backoff_max_ms"] = std::to_string(h.retry_backoff_max.count());
  p["request_timeout_ms"] = std::to_string(h.request_timeout.count());
  p["connect_timeout_ms"] = std::to_string(h.connect_timeout.count());
  p["multipart_threshold"] = std::to_string(h.multipart_threshold);
  p["crtMinLimit"] = std::to_string(h.multipart_threshold);
  p["part_size"] = std::to_string(h.part_size);
  p["vram_staging_bytes"] = std::to_string(h.vram_staging_bytes);
  p["ca_bundle"] = h.ca_bundle;
  p["verify_tls"] = h.verify_tls ? "true" : "false";
}

}  // namespace

config config::from_params(const nixl::params& p) {
  config c;
  c.access_key = param_or_env(p, "access_key", {"AWS_ACCESS_KEY_ID"});
  c.secret_key = param_or_env(p, "secret_key", {"AWS_SECRET_ACCESS_KEY"});
  c.session_token = param_or_env(p, "session_token", {"AWS_SESSION_TOKEN"});
  c.bucket = param_or_env(p, "bucket", {"AWS_DEFAULT_BUCKET"});
  c.region = param_or_env(p, "region", {"AWS_REGION", "AWS_DEFAULT_REGION"}, "us-east-1");
  c.scheme = param_or_env(p, "scheme", {}, "https");
  if (c.scheme != "http" && c.scheme != "https")
    raise(status::invalid_param, "OBJ parameter scheme='{}': use http or https", c.scheme);
  const std::string ep = param_or_env(p, "endpoint_override", {"AWS_ENDPOINT_OVERRIDE"});
  if (ep.empty()) {
    c.endpoint = fmt::format("s3.{}.amazonaws.com", c.region);
  } else {
    std::string scheme = ep.find("://") != std::string::npos ? std::string{} : c.scheme;
    split_url("OBJ", "endpoint_override", ep, scheme, c.endpoint, nullptr);
    c.scheme = scheme;
  }
  if (auto it = p.find("use_virtual_addressing"); it != p.end())
    c.virtual_addressing = parse_bool("OBJ", "use_virtual_addressing", it->second);
  if (auto it = p.find("unsigned_payload"); it != p.end())
    c.unsigned_payload = parse_bool("OBJ", "unsigned_payload", it->second);
  if (c.bucket.empty())
    raise(status::invalid_param,
          "OBJ: no bucket; set the parameter bucket or the environment variable "
          "AWS_DEFAULT_BUCKET");
  if (c.access_key.empty() != c.secret_key.empty())
    raise(status::invalid_param,
          "OBJ: access_key and secret_key go together (or AWS_ACCESS_KEY_ID and "
          "AWS_SECRET_ACCESS_KEY)");
  parse_http("OBJ", p, c.http);
  return c;
}

nixl::params config::to_params() const {
  nixl::params p{{"access_key", access_key},
                 {"secret_key", secret_key.empty() ? "" : "<set>"},
                 {"session_token", session_token.empty() ? "" : "<set>"},
                 {"bucket", bucket},
                 {"endpoint_override", endpoint},
                 {"scheme", scheme},
                 {"region", region},
                 {"use_virtual_addressing", virtual_addressing ? "true" : "false"},
                 {"unsigned_payload", unsigned_payload ? "true" : "false"},
                 {"req_checksum", "supported"},
                 {"num_threads", "1"}};
  put_http(http, p);
  return p;
}

}  // namespace nixl::obj

namespace nixl::azure_blob {
namespace {

/// Azure's rule for container names; "$root", "$logs" and "$web" are its own containers.
bool container_name_ok(std::string_view n) {
  if (n == "$root" || n == "$logs" || n == "$web") return true;
  return n.size() >= 3 && n.size() <= 63 &&
         n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string_view::npos &&
         n.front() != '-' && n.back() != '-' && n.find("--") == std::string_view::npos;
}

}  // namespace

config config::from_params(const nixl::params& p) {
  config c;
  const std::string cs =
      obj::param_or_env(p, "connection_string", {"AZURE_STORAGE_CONNECTION_STRING"});
  std::string url, proxy;
  bool dev = false;
  std::string_view rest = cs;
  while (!rest.empty()) {
    const auto semi = rest.find(';');
    std::string_view item = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "AccountName")
      c.account_name = std::string(v);
    else if (k == "AccountKey")
      c.account_key = std::string(v);
    else if (k == "BlobEndpoint")
      url = std::string(v);
    else if (k == "DefaultEndpointsProtocol")
      c.scheme = std::string(v);
    else if (k == "UseDevelopmentStorage")
      dev = v == "true" || v == "True";
    else if (k == "DevelopmentStorageProxyUri")
      proxy = std::string(v);
  }
  if (dev) {
    // Azure's storage emulator (azurite): its well-known account, blob service on port 10000
    // of the loopback host or of the proxy named. The keys of the string above still win.
    if (c.account_name.empty()) c.account_name = std::string(development_account);
    if (c.account_key.empty()) c.account_key = std::string(development_key);
    if (url.empty()) {
      std::string scheme = "http", host = "127.0.0.1", path;
      if (!proxy.empty()) {
        obj::split_url("AZURE_BLOB", "DevelopmentStorageProxyUri", proxy, scheme, host, &path);
        // the host only, on the emulator's port (Azure's SDKs replace any port given)
        const auto colon = host.rfind(':');
        if (colon != std::string::npos && host.find(']', colon) == std::string::npos)
          host.erase(colon);
      }
      url = fmt::format("{}://{}:10000/{}", scheme, host, c.account_name);
    }
  }
  c.account_name = obj::param_or_env(p, "account_name", {"AZURE_STORAGE_ACCOUNT"}, c.account_name);
  c.account_key = obj::param_or_env(p, "account_key", {"AZURE_STORAGE_KEY"}, c.account_key);
  c.container = obj::param_or_env(p, "container_name", {}, {});
  url = obj::param_or_env(p, "account_url", {}, url);
  if (c.account_name.empty())
    raise(status::invalid_param,
          "AZURE_BLOB: no account; set account_name, AZURE_STORAGE_ACCOUNT or a connection_string");
  if (c.account_key.empty())
    raise(status::invalid_param,
          "AZURE_BLOB: no key; set account_key, AZURE_STORAGE_KEY or a connection_string");
  if (c.container.empty())
    raise(status::invalid_param, "AZURE_BLOB: no container; set container_name");
  if (!container_name_ok(c.container))
    raise(status::invalid_param,
          "AZURE_BLOB: container_name '{}': give 3-63 lowercase letters, digits and single "
          "hyphens, starting and ending with a letter or digit (or $root, $logs, $web)",
          c.container);
  if (url.empty()) {
    c.host = c.account_name + ".blob.core.windows.net";
  } else {
    if (url.find("://") == std::string::npos) url = c.scheme + "://" + url;
    obj::split_url("AZURE_BLOB", "account_url", url, c.scheme, c.host, &c.path_prefix);
  }
  obj::parse_http("AZURE_BLOB", p, c.http);
  return c;
}

nixl::params config::to_params() const {
  nixl::params p{{"account_name", account_name},
                 {"account_key", account_key.empty() ? "" : "<set>"},
                 {"container_name", container},
                 {"account_url", scheme + "://" + host + path_prefix}};
  obj::put_http(http, p);
  return p;
}

}  // namespace nixl::azure_blob
