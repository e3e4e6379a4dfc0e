// Azure Storage Shared Key (detail/shared_key.hpp).

#include <nixl/backends/obj/detail/shared_key.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>

#include <nixl/backends/obj/detail/crypto.hpp>

namespace nixl::obj::detail::shared_key {
namespace {

std::string trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return std::string(v);
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

std::string string_to_sign(const request& r) {
  std::map<std::string, std::string> std_headers;
  std::map<std::string, std::string> ms_headers;
  for (const auto& [k, v] : r.headers) {
    std::string name = lower(k);
    if (name.rfind("x-ms-", 0) == 0)
      ms_headers[name] = trim(v);
    else
      std_headers[name] = trim(v);
  }
  auto get = [&](const char* name) -> std::string {
    auto it = std_headers.find(name);
    return it == std_headers.end() ? std::string{} : it->second;
  };
  std::string s;
  s.append(r.method).push_back('\n');
  for (const char* h :
       {"content-encoding", "content-language", "content-length", "content-md5", "content-type",
        "date", "if-modified-since", "if-match", "if-none-match", "if-unmodified-since", "range"}) {
    std::string v = get(h);
    if (std::string_view(h) == "content-length" && v == "0") v.clear();
    s.append(v).push_back('\n');
  }
  for (const auto& [k, v] : ms_headers) s.append(k).append(":").append(v).push_back('\n');
  s.append("/").append(r.account).append(r.resource_path);  // the path stays encoded
  std::map<std::string, std::vector<std::string>> params;
  for_each_query_item(r.query, [&](std::string_view name, std::string_view value) {
    params[lower(decode(name))].push_back(decode(value));
  });
  for (auto& [k, vs] : params) {
    std::sort(vs.begin(), vs.end());
    s.append("\n").append(k).append(":");
    for (std::size_t i = 0; i < vs.size(); ++i) {
      if (i) s.push_back(',');
      s.append(vs[i]);
    }
  }
  return s;
}

std::string authorization(const request& r, std::string_view decoded_key) {
  const digest mac =
      hmac_sha256({reinterpret_cast<const unsigned char*>(decoded_key.data()), decoded_key.size()},
                  string_to_sign(r));
  return "SharedKey " + std::string(r.account) + ":" + base64(mac);
}

std::string http_date(long long unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

}  // namespace nixl::obj::detail::shared_key
