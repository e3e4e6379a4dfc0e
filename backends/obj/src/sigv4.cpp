// AWS Signature Version 4 (detail/sigv4.hpp).

#include <nixl/backends/obj/detail/sigv4.hpp>

#include <algorithm>
#include <cctype>
#include <ctime>

#include <fmt/format.h>

namespace nixl::obj::detail::sigv4 {
namespace {

/// Trims both ends and collapses inner runs of spaces and tabs into one space.
std::string trim_all(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::span<const unsigned char> bytes_of(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

}  // namespace

std::string canonical_query(std::string_view query) {
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for_each_query_item(query,
                      [&](std::string_view k, std::string_view v) { pairs.emplace_back(k, v); });
  std::sort(pairs.begin(), pairs.end());
  std::string out;
  for (const auto& [k, v] : pairs) {
    if (!out.empty()) out.push_back('&');
    out.append(k).push_back('=');
    out.append(v);
  }
  return out;
}

canonical canonical_request(const request& r) {
  std::vector<std::pair<std::string, std::string>> hs;
  hs.reserve(r.headers.size());
  for (const auto& [k, v] : r.headers) hs.emplace_back(lower(k), trim_all(v));
  std::stable_sort(hs.begin(), hs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  canonical c;
  std::string& t = c.text;
  t.append(r.method).push_back('\n');
  t.append(r.path.empty() ? std::string_view("/") : r.path).push_back('\n');
  t.append(canonical_query(r.query)).push_back('\n');
  for (std::size_t i = 0; i < hs.size();) {
    std::size_t j = i;
    t.append(hs[i].first).push_back(':');
    for (; j < hs.size() && hs[j].first == hs[i].first; ++j) {
      if (j != i) t.push_back(',');
      t.append(hs[j].second);
    }
    t.push_back('\n');
    if (!c.signed_headers.empty()) c.signed_headers.push_back(';');
    c.signed_headers.append(hs[i].first);
    i = j;
  }
  t.push_back('\n');
  t.append(c.signed_headers).push_back('\n');
  t.append(r.payload_hash);
  return c;
}

std::string scope(std::string_view date, const credentials& c) {
  return fmt::format("{}/{}/{}/aws4_request", date, c.region, c.service);
}

std::string string_to_sign(std::string_view amz_date, std::string_view scope_text,
                           std::string_view canonical_text) {
  return fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope_text,
                     hex(sha256(canonical_text)));
}

digest signing_key(std::string_view secret, std::string_view date, std::string_view region,
                   std::string_view service) {
  const std::string k0 = "AWS4" + std::string(secret);
  digest k = hmac_sha256(bytes_of(k0), date);
  k = hmac_sha256(k, region);
  k = hmac_sha256(k, service);
  return hmac_sha256(k, "aws4_request");
}

std::string authorization(const request& r, const credentials& c, std::string_view amz_date) {
  const std::string_view date = amz_date.substr(0, 8);
  const canonical can = canonical_request(r);
  const std::string sc = scope(date, c);
  const std::string sts = string_to_sign(amz_date, sc, can.text);
  const digest key = signing_key(c.secret_key, date, c.region, c.service);
  return fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
                     c.access_key, sc, can.signed_headers, hex(hmac_sha256(key, sts)));
}

std::string amz_date(long long unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace nixl::obj::detail::sigv4
