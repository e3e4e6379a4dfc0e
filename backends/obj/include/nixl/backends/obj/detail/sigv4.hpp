#pragma once
/// AWS Signature Version 4, as pure functions of (request, credentials, time): the canonical
/// request, the string to sign, the HMAC-SHA256 key chain and the Authorization header. Tested
/// on AWS's published test vectors (tests/backends/obj/sigv4_test.cpp) before it ever talks to
/// a server.

#include <string>
#include <string_view>
#include <vector>

#include <nixl/backends/obj/detail/crypto.hpp>
#include <nixl/backends/obj/detail/signing.hpp>

namespace nixl::obj::detail::sigv4 {

using detail::header;

/// What is signed. `path` is the URI path exactly as sent (already percent-encoded; S3 does
/// not encode it twice); `query` is the query string as sent, without '?', each name and value
/// already percent-encoded; `headers` are the headers to sign (host and x-amz-date included).
struct request {
  std::string_view method;
  std::string_view path;
  std::string_view query;
  std::vector<header> headers;
  std::string_view payload_hash;  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

struct credentials {
  std::string_view access_key;
  std::string_view secret_key;
  std::string_view region;
  std::string_view service;  // "s3"
};

/// The canonical request and its signed-header list ("host;x-amz-date").
struct canonical {
  std::string text;
  std::string signed_headers;
};

/// Canonical query string: pairs sorted by name, then value; a name without '=' gets "=".
std::string canonical_query(std::string_view query);
/// Canonical request: method, path, query, lower-cased and trimmed headers (inner runs of
/// spaces collapsed, repeated names joined with ','), the signed-header list, the payload hash.
canonical canonical_request(const request& r);
/// "<yyyymmdd>/<region>/<service>/aws4_request".
std::string scope(std::string_view date, const credentials& c);
/// "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex sha256 of the canonical request>".
std::string string_to_sign(std::string_view amz_date, std::string_view scope,
                           std::string_view canonical_text);
/// The key chain: HMAC("AWS4" + secret, date) -> region -> service -> "aws4_request".
digest signing_key(std::string_view secret, std::string_view date, std::string_view region,
                   std::string_view service);
/// The Authorization header's value for `r` signed at `amz_date` ("20150830T123600Z").
std::string authorization(const request& r, const credentials& c, std::string_view amz_date);

/// "YYYYMMDDTHHMMSSZ" of a UNIX time.
std::string amz_date(long long unix_seconds);

}  // namespace nixl::obj::detail::sigv4
