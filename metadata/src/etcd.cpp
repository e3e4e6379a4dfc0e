#include <nixl/metadata/etcd.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nixl/log.hpp>
#include <nixl/status.hpp>
#include <nlohmann/json.hpp>

namespace nixl::metadata {

using json = nlohmann::json;

// base64

namespace {
constexpr std::string_view b64_chars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::int8_t, 256> b64_table() {
  std::array<std::int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (std::size_t i = 0; i < b64_chars.size(); ++i) {
    t[static_cast<unsigned char>(b64_chars[i])] = static_cast<std::int8_t>(i);
  }
  return t;
}
constexpr auto b64_index = b64_table();
}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto b = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(in[k]));
  };
  for (; i + 3 <= in.size(); i += 3) {
    std::uint32_t v = (b(i) << 16) | (b(i + 1) << 8) | b(i + 2);
    out.push_back(b64_chars[(v >> 18) & 63]);
    out.push_back(b64_chars[(v >> 12) & 63]);
    out.push_back(b64_chars[(v >> 6) & 63]);
    out.push_back(b64_chars[v & 63]);
  }
  if (in.size() - i == 1) {
    std::uint32_t v = b(i) << 16;
    out.push_back(b64_chars[(v >> 18) & 63]);
    out.push_back(b64_chars[(v >> 12) & 63]);
    out.append("==");
  } else if (in.size() - i == 2) {
    std::uint32_t v = (b(i) << 16) | (b(i + 1) << 8);
    out.push_back(b64_chars[(v >> 18) & 63]);
    out.push_back(b64_chars[(v >> 12) & 63]);
    out.push_back(b64_chars[(v >> 6) & 63]);
    out.push_back('=');
  }
  return out;
}

std::string base64_decode(std::string_view in) {
  if (in.size() % 4 != 0) {
    nixl::raise(status::invalid_param, "base64: length {} is not a multiple of 4", in.size());
  }
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int pad = 0;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      auto d = b64_index[static_cast<unsigned char>(c)];
      if (d < 0 || pad > 0)
        nixl::raise(status::invalid_param, "base64: bad character at {}", i + k);
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out.push_back(static_cast<char>((v >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xff));
  }
  return out;
}

// helpers

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct curl_deleter {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
using easy_ptr = std::unique_ptr<CURL, curl_deleter>;

struct slist_deleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using slist_ptr = std::unique_ptr<curl_slist, slist_deleter>;

std::vector<std::string> split_endpoints(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    auto comma = s.find(',');
    auto part = s.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '/')) part.remove_suffix(1);
    if (!part.empty()) {
      std::string ep(part);
      if (ep.find("://") == std::string::npos) ep = "http://" + ep;
      out.push_back(std::move(ep));
    }
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

/// End of the range of keys that start with `prefix` (etcd's "range_end").
std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::int64_t as_i64(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_string()) return std::stoll(it->get<std::string>());
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return 0;
}

std::string as_b64(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return {};
  return base64_decode(it->get<std::string>());
}

/// Common curl settings: never use a proxy (etcd is addressed directly), no signals.
void base_options(CURL* c, std::chrono::milliseconds connect_timeout) {
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
}

size_t append_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

}  // namespace

// etcd_client

struct etcd_client::impl {
  std::vector<std::string> endpoints;
  std::size_t current = 0;
  std::chrono::milliseconds timeout;
  easy_ptr easy;
  std::string api = "/v3";  // etcd 3.3 serves the gateway under /v3beta

  json call(std::string_view path, const json& body) {
    const std::string payload = body.dump();
    std::string last_error;
    for (std::size_t attempt = 0; attempt < endpoints.size(); ++attempt) {
      const std::string& ep = endpoints[current];
      std::string response;
      long http = 0;
      CURLcode rc = perform(ep, path, payload, response, http);
      if (rc == CURLE_OK && http == 404 && api == "/v3") {
        api = "/v3beta";
        rc = perform(ep, path, payload, response, http);
        if (rc == CURLE_OK && http == 404) api = "/v3";
      }
      if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
          (rc == CURLE_OPERATION_TIMEDOUT && response.empty())) {
        last_error = fmt::format("{}: {}", ep, curl_easy_strerror(rc));
        current = (current + 1) % endpoints.size();
        continue;
      }
      if (rc != CURLE_OK) {
        nixl::raise(status::backend, "etcd {}{} at {}: {}", api, path, ep, curl_easy_strerror(rc));
      }
      // A streaming endpoint (lease keep-alive) answers one JSON object per line.
      auto nl = response.find('\n');
      std::string_view first = std::string_view(response).substr(0, nl);
      json j = json::parse(first, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        nixl::raise(status::backend, "etcd {}{} at {}: HTTP {}, unparsable reply '{}'", api, path,
                    ep, http, first.substr(0, 200));
      }
      if (auto e = j.find("error"); e != j.end()) {
        std::string msg = j.value("message", e->is_string() ? e->get<std::string>() : e->dump());
        if (e->is_object()) msg = e->value("message", msg);
        nixl::raise(status::backend, "etcd {}{} at {}: {}", api, path, ep, msg);
      }
      if (http != 200) {
        nixl::raise(status::backend, "etcd {}{} at {}: HTTP {}", api, path, ep, http);
      }
      if (auto r = j.find("result"); r != j.end() && r->is_object()) return *r;
      return j;
    }
    nixl::raise(status::backend,
                "etcd: no endpoint answered ({}); is etcd running at NIXL_ETCD_ENDPOINTS?",
                last_error);
  }

  CURLcode perform(const std::string& ep, std::string_view path, const std::string& payload,
                   std::string& response, long& http) {
    CURL* c = easy.get();
    curl_easy_reset(c);
    base_options(c, timeout);
    const std::string url = ep + api + std::string(path);
    slist_ptr headers(curl_slist_append(nullptr, "Content-Type: application/json"));
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &response);
    response.clear();
    CURLcode rc = curl_easy_perform(c);
    http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    return rc;
  }

  static etcd_range to_range(const json& j) {
    etcd_range r;
    if (auto h = j.find("header"); h != j.end()) r.revision = as_i64(*h, "revision");
    if (auto kvs = j.find("kvs"); kvs != j.end() && kvs->is_array()) {
      for (const auto& kv : *kvs) {
        r.kvs.push_back({as_b64(kv, "key"), as_b64(kv, "value"), as_i64(kv, "mod_revision"),
                         as_i64(kv, "lease")});
      }
    }
    return r;
  }
};

etcd_client::etcd_client(std::string_view endpoints, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>()) {
  global_init();
  impl_->endpoints = split_endpoints(endpoints);
  impl_->timeout = timeout;
  if (impl_->endpoints.empty()) {
    nixl::raise(status::invalid_param,
                "etcd: no endpoint in '{}'; set NIXL_ETCD_ENDPOINTS to e.g. http://127.0.0.1:2379",
                endpoints);
  }
  impl_->easy.reset(curl_easy_init());
  if (!impl_->easy) nixl::raise(status::backend, "etcd: curl_easy_init failed");
}

etcd_client::~etcd_client() = default;

std::int64_t etcd_client::lease_grant(std::chrono::seconds ttl) {
  json r = impl_->call("/lease/grant", {{"TTL", ttl.count()}});
  auto id = as_i64(r, "ID");
  if (id == 0) nixl::raise(status::backend, "etcd lease grant: reply without an ID: {}", r.dump());
  return id;
}

std::int64_t etcd_client::lease_keepalive(std::int64_t id) {
  json r = impl_->call("/lease/keepalive", {{"ID", std::to_string(id)}});
  return as_i64(r, "TTL");
}

void etcd_client::lease_revoke(std::int64_t id) {
  impl_->call("/lease/revoke", {{"ID", std::to_string(id)}});
}

std::int64_t etcd_client::put(std::string_view key, std::string_view value, std::int64_t lease) {
  json body = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  json r = impl_->call("/kv/put", body);
  if (auto h = r.find("header"); h != r.end()) return as_i64(*h, "revision");
  return 0;
}

etcd_range etcd_client::get(std::string_view key) {
  return impl::to_range(impl_->call("/kv/range", {{"key", base64_encode(key)}}));
}

etcd_range etcd_client::get_prefix(std::string_view prefix) {
  return impl::to_range(impl_->call(
      "/kv/range",
      {{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}}));
}

std::int64_t etcd_client::delete_prefix(std::string_view prefix) {
  json r = impl_->call("/kv/deleterange", {{"key", base64_encode(prefix)},
                                           {"range_end", base64_encode(prefix_end(prefix))}});
  return as_i64(r, "deleted");
}

bool etcd_client::healthy() noexcept {
  try {
    impl_->call("/maintenance/status", json::object());
    return true;
  } catch (...) {
    return false;
  }
}

const std::string& etcd_client::endpoint() const noexcept {
  return impl_->endpoints[impl_->current];
}
const std::vector<std::string>& etcd_client::endpoints() const noexcept {
  return impl_->endpoints;
}

// etcd_watcher

namespace {
/// Longest line a watch stream may send before it is considered broken (a watch response holds
/// whole values, so this bounds one metadata blob, base64-encoded).
constexpr std::size_t max_watch_line = std::size_t{256} << 20;
}  // namespace

struct etcd_watcher::impl {
  struct stream {
    id wid = 0;
    easy_ptr easy;
    slist_ptr headers;
    std::string body;
    std::string buf;
    std::vector<update>* sink = nullptr;
    std::string failure;
    bool created = false;
  };

  std::string endpoint;
  std::string api = "/v3";
  std::chrono::milliseconds connect_timeout;
  CURLM* multi = nullptr;
  std::map<id, std::unique_ptr<stream>> streams;
  std::vector<update> pending;  // produced by write callbacks
  id next_id = 1;

  static size_t on_data(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<stream*>(user);
    s->buf.append(data, size * n);
    std::size_t start = 0;
    for (;;) {
      auto nl = s->buf.find('\n', start);
      if (nl == std::string::npos) break;
      parse_line(*s, std::string_view(s->buf).substr(start, nl - start));
      start = nl + 1;
    }
    s->buf.erase(0, start);
    if (s->buf.size() > max_watch_line) {
      s->failure = "watch stream line too long";
      return 0;  // aborts the transfer
    }
    return size * n;
  }

  static void parse_line(stream& s, std::string_view line) {
    if (line.empty() || !s.failure.empty()) return;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      s.failure = fmt::format("unparsable watch message '{}'", line.substr(0, 200));
      return;
    }
    if (auto e = j.find("error"); e != j.end()) {
      s.failure = e->is_object() ? e->value("message", e->dump()) : e->dump();
      return;
    }
    auto r = j.find("result");
    if (r == j.end() || !r->is_object()) return;
    if (r->value("created", false)) s.created = true;
    if (r->value("canceled", false)) {
      s.failure = fmt::format("watch canceled by etcd: {}", r->value("cancel_reason", "no reason"));
      return;
    }
    auto evs = r->find("events");
    if (evs == r->end() || !evs->is_array()) return;
    for (const auto& ev : *evs) {
      try {
        etcd_event e;
        e.type = ev.value("type", std::string("PUT")) == "DELETE" ? etcd_event::kind::del
                                                                  : etcd_event::kind::put;
        if (auto kv = ev.find("kv"); kv != ev.end() && kv->is_object()) {
          e.key = as_b64(*kv, "key");
          e.value = as_b64(*kv, "value");
          e.revision = as_i64(*kv, "mod_revision");
        }
        s.sink->push_back({s.wid, std::move(e), {}});
      } catch (const std::exception& ex) {
        s.failure = fmt::format("bad watch event: {}", ex.what());
        return;
      }
    }
  }

  void remove(id w) noexcept {
    auto it = streams.find(w);
    if (it == streams.end()) return;
    curl_multi_remove_handle(multi, it->second->easy.get());
    streams.erase(it);
  }
};

etcd_watcher::etcd_watcher(std::string endpoint, std::chrono::milliseconds connect_timeout)
    : impl_(std::make_unique<impl>()) {
  global_init();
  auto eps = split_endpoints(endpoint);
  if (eps.empty())
    nixl::raise(status::invalid_param, "etcd watcher: no endpoint in '{}'", endpoint);
  impl_->endpoint = eps.front();
  impl_->connect_timeout = connect_timeout;
  impl_->multi = curl_multi_init();
  if (impl_->multi == nullptr) nixl::raise(status::backend, "etcd watcher: curl_multi_init failed");
}

etcd_watcher::~etcd_watcher() {
  while (!impl_->streams.empty()) impl_->remove(impl_->streams.begin()->first);
  curl_multi_cleanup(impl_->multi);
}

etcd_watcher::id etcd_watcher::watch(std::string_view key, bool prefix,
                                     std::int64_t start_revision) {
  auto s = std::make_unique<impl::stream>();
  s->wid = impl_->next_id++;
  s->sink = &impl_->pending;
  json req = {{"key", base64_encode(key)}};
  if (prefix) req["range_end"] = base64_encode(prefix_end(key));
  if (start_revision > 0) req["start_revision"] = std::to_string(start_revision);
  s->body = json{{"create_request", req}}.dump();
  s->easy.reset(curl_easy_init());
  if (!s->easy) nixl::raise(status::backend, "etcd watch: curl_easy_init failed");
  CURL* c = s->easy.get();
  base_options(c, impl_->connect_timeout);
  const std::string url = impl_->endpoint + impl_->api + "/watch";
  s->headers.reset(curl_slist_append(nullptr, "Content-Type: application/json"));
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, s->headers.get());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, s->body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(s->body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, impl::on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s.get());
  curl_easy_setopt(c, CURLOPT_PRIVATE, s.get());
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  if (auto rc = curl_multi_add_handle(impl_->multi, c); rc != CURLM_OK) {
    nixl::raise(status::backend, "etcd watch: curl_multi_add_handle: {}", curl_multi_strerror(rc));
  }
  id w = s->wid;
  impl_->streams.emplace(w, std::move(s));
  return w;
}

void etcd_watcher::cancel(id w) noexcept {
  impl_->remove(w);
}

std::size_t etcd_watcher::size() const noexcept {
  return impl_->streams.size();
}

void etcd_watcher::set_endpoint(std::string_view endpoint) {
  auto eps = split_endpoints(endpoint);
  if (!eps.empty()) impl_->endpoint = eps.front();
}

const std::string& etcd_watcher::endpoint() const noexcept {
  return impl_->endpoint;
}

void etcd_watcher::poll(std::chrono::milliseconds timeout, std::vector<update>& out) {
  auto collect = [&] {
    int running = 0;
    curl_multi_perform(impl_->multi, &running);
    int left = 0;
    std::vector<id> done;
    while (CURLMsg* m = curl_multi_info_read(impl_->multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      impl::stream* s = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&s));
      if (s == nullptr) continue;
      std::string why = !s->failure.empty() ? s->failure
                        : m->data.result != CURLE_OK
                            ? std::string(curl_easy_strerror(m->data.result))
                            : std::string("stream closed by etcd");
      impl_->pending.push_back({s->wid, std::nullopt, fmt::format("{}: {}", impl_->endpoint, why)});
      done.push_back(s->wid);
    }
    // A stream whose callback saw an error message, without the transfer ending, is ended here.
    for (auto& [w, s] : impl_->streams) {
      if (!s->failure.empty() && std::find(done.begin(), done.end(), w) == done.end()) {
        impl_->pending.push_back(
            {w, std::nullopt, fmt::format("{}: {}", impl_->endpoint, s->failure)});
        done.push_back(w);
      }
    }
    for (id w : done) impl_->remove(w);
  };
  collect();
  if (impl_->pending.empty()) {
    int fds = 0;
    curl_multi_poll(impl_->multi, nullptr, 0, static_cast<int>(timeout.count()), &fds);
    collect();
  }
  // Drop events of streams that were cancelled meanwhile; keep the order.
  for (auto& u : impl_->pending) out.push_back(std::move(u));
  impl_->pending.clear();
}

void etcd_watcher::wakeup() noexcept {
  curl_multi_wakeup(impl_->multi);
}

}  // namespace nixl::metadata
