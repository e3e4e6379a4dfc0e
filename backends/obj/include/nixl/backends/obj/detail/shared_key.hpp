#pragma once
/// Azure Storage Shared Key (Blob service, version 2015-02-21 and later), as pure functions: the
/// string to sign and the Authorization header.

#include <string>
#include <string_view>
#include <vector>

#include <nixl/backends/obj/detail/signing.hpp>

namespace nixl::obj::detail::shared_key {

using detail::header;

/// What is signed. `resource_path` is the URI path as sent (percent-encoded, starting with '/';
/// for path-style endpoints such as azurite it starts with the account); `query` the raw query
/// string, without '?'. `headers` are every header sent, in any case: the standard ones that
/// the string to sign names (Content-Length, Content-Type, Range, ...) and every x-ms-* one.
struct request {
  std::string_view method;
  std::string_view account;
  std::string_view resource_path;
  std::string_view query;
  std::vector<header> headers;
};

/// VERB, the eleven standard headers (Content-Length empty when 0), the sorted x-ms-* headers,
/// then "/<account><path>" (the path as sent, still encoded) and each query parameter as
/// "\n<name>:<value>" sorted by name (names lower-cased, both percent-decoded, repeated names
/// joined with ",").
std::string string_to_sign(const request& r);
/// "SharedKey <account>:<base64 HMAC-SHA256 of the string to sign under the decoded key>".
std::string authorization(const request& r, std::string_view decoded_key);
/// RFC 1123 date ("Sun, 11 Oct 2009 21:49:13 GMT") of a UNIX time, for x-ms-date.
std::string http_date(long long unix_seconds);

}  // namespace nixl::obj::detail::shared_key
