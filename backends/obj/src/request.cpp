// The request shape of the object stores: what OBJ (S3) and AZURE_BLOB ask the HTTP engine for
// (method, URL, headers, byte ranges, bodies, parts), and how their error answers read. The
// stores add their signing, their multipart protocol and their hints (s3.cpp, azure.cpp).

#include <algorithm>

#include <fmt/format.h>
#include <nixl/backends/obj/detail/crypto.hpp>

#include "internal.hpp"

namespace nixl::obj::detail {

std::string_view xml_value(std::string_view xml, std::string_view tag) noexcept {
  const std::string open = fmt::format("<{}>", tag), close = fmt::format("</{}>", tag);
  const auto a = xml.find(open);
  if (a == std::string_view::npos) return {};
  const auto b = xml.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  return xml.substr(a + open.size(), b - a - open.size());
}

std::string describe(const http_op& op, const dialect& d) {
  const job& j = *op.owner;
  std::string s = fmt::format("{} {} '{}/{}'", d.name(), op.method, d.container(), j.key);
  if (op.method == "GET" && op.down_cap > 0)
    s += fmt::format(" bytes {}-{}", op.range_begin, op.range_begin + op.down_cap - 1);
  else if (!op.query.empty())
    s += fmt::format(" ?{}", op.query.substr(0, 80));
  return s;
}

std::string dialect::object_path(std::string_view key) const {
  return prefix_ + "/" + uri_encode(key, true);
}

void dialect::add_get_ops(job& j, const http_config& cfg) const {
  const std::string path = object_path(j.key);
  const std::size_t piece = j.len > cfg.multipart_threshold ? cfg.part_size : j.len;
  for (std::size_t at = 0; at < j.len; at += piece) {
    const std::size_t n = std::min(piece, j.len - at);
    http_op& op = j.ops.emplace_back();
    op.owner = &j;
    op.method = "GET";
    op.path = path;
    op.range_begin = j.offset + at;
    op.headers.emplace_back(range_header_,
                            fmt::format("bytes={}-{}", op.range_begin, op.range_begin + n - 1));
    op.down = j.mem + at;
    op.down_cap = n;
  }
}

http_op& dialect::only_op(job& j, std::string method, std::string path, std::string query) {
  j.ops.clear();
  http_op& op = j.ops.emplace_back();
  op.method = std::move(method);
  op.path = std::move(path);
  op.query = std::move(query);
  return op;
}

std::vector<std::string> dialect::header_lines(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::vector<std::string> lines;
  lines.reserve(headers.size() + 2);
  for (const auto& [k, v] : headers) lines.push_back(k + ": " + v);
  return lines;
}

bool dialect::build_stage(job& j, const http_config& cfg) {
  if (j.kind == job_kind::put && j.len > cfg.multipart_threshold) return upload_stage(j, cfg);
  if (j.stage > 0) return false;
  switch (j.kind) {
    case job_kind::get:
      j.ops.clear();
      add_get_ops(j, cfg);
      return true;
    case job_kind::head:
      only_op(j, "HEAD", object_path(j.key));
      return true;
    case job_kind::make_bucket:
      container_op(j);
      return true;
    case job_kind::put: {
      http_op& op = only_op(j, "PUT", object_path(j.key));
      op.up = j.mem;
      op.up_len = j.len;
      put_headers(op);
      return true;
    }
    case job_kind::abort_upload:
      return abort_op(j);
  }
  return false;
}

status dialect::map_error(const http_op& op, std::string& msg) const {
  std::string code(xml_value(op.body, "Code"));
  if (code.empty()) code = op.error_header;
  if (code.empty()) code = fmt::format("HTTP {}", op.http);
  std::string text(xml_value(op.body, "Message"));
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);  // drop a RequestId
  status s = status::backend;
  if (op.http == 404)
    s = status::not_found;
  else if (op.http == 403 || op.http == 401)
    s = status::not_allowed;
  else if (op.http == 400 || op.http == 411 || op.http == 416)
    s = status::invalid_param;
  msg = fmt::format("{}: HTTP {} {}{}{}{}", describe(op, *this), op.http, code,
                    text.empty() ? "" : ": ", text, hint(s, code));
  if (op.attempt > 0) msg += fmt::format(" (after {} attempts)", op.attempt + 1);
  return s;
}

}  // namespace nixl::obj::detail
