// The Azure Blob dialect of the object store engine: account/container URLs (path-style for
// azurite), Shared Key on every attempt, block blobs (Put Blob, or Put Block + Put Block List
// above the threshold), and Azure's error codes.

#include <chrono>

#include <fmt/format.h>
#include <nixl/backends/obj/detail/crypto.hpp>
#include <nixl/backends/obj/detail/shared_key.hpp>

#include "internal.hpp"

namespace nixl::obj::detail {
namespace {

constexpr std::string_view api_version = "2021-08-06";

class azure_dialect final : public dialect {
 public:
  explicit azure_dialect(const azure_blob::config& c)
      : c_(c), key_(unbase64(c.account_key, "AZURE_BLOB account_key")) {
    base_ = c_.scheme + "://" + c_.host;
    prefix_ = c_.path_prefix + "/" + uri_encode(c_.container, false);
  }

  std::string_view name() const noexcept override { return "AZURE_BLOB"; }
  const std::string& base_url() const noexcept override { return base_; }
  std::string_view container() const noexcept override { return c_.container; }
  std::string_view range_header() const noexcept override { return "x-ms-range"; }
  std::string object_path(std::string_view key) const override {
    return prefix_ + "/" + uri_encode(key, true);
  }

  bool build_stage(job& j, const http_config& cfg) override {
    switch (j.kind) {
      case job_kind::get:
        if (j.stage > 0) return false;
        j.ops.clear();
        add_get_ops(j, *this, cfg);
        return true;
      case job_kind::head: {
        if (j.stage > 0) return false;
        j.ops.clear();
        http_op& op = j.ops.emplace_back();
        op.method = "HEAD";
        op.path = object_path(j.key);
        return true;
      }
      case job_kind::make_bucket: {
        if (j.stage > 0) return false;
        j.ops.clear();
        http_op& op = j.ops.emplace_back();
        op.method = "PUT";
        op.path = prefix_;
        op.query = "restype=container";
        return true;
      }
      case job_kind::put:
        if (j.len <= cfg.multipart_threshold) {
          if (j.stage > 0) return false;
          j.ops.clear();
          http_op& op = j.ops.emplace_back();
          op.method = "PUT";
          op.path = object_path(j.key);
          op.up = j.mem;
          op.up_len = j.len;
          op.headers.emplace_back("x-ms-blob-type", "BlockBlob");
          return true;
        }
        return block_stage(j, cfg);
      case job_kind::abort_upload:
        return false;  // uncommitted blocks are dropped by the service itself
    }
    return false;
  }

  std::vector<std::string> sign(http_op& op) override {
    const auto now = std::chrono::system_clock::now();
    const std::string date = shared_key::http_date(
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
    shared_key::request r;
    r.method = op.method;
    r.account = c_.account_name;
    r.resource_path = op.path;
    r.query = op.query;
    r.headers.emplace_back("x-ms-date", date);
    r.headers.emplace_back("x-ms-version", std::string(api_version));
    for (const auto& h : op.headers) r.headers.push_back(h);
    std::vector<std::string> lines;
    for (const auto& [k, v] : r.headers) lines.push_back(k + ": " + v);
    // Signed as curl sends them: a length for bodies, and no Content-Type unless given.
    if (op.method == "PUT" || op.method == "POST")
      r.headers.emplace_back("Content-Length", std::to_string(op.up_len));
    lines.push_back("Content-Type:");
    lines.push_back("Authorization: " + shared_key::authorization(r, key_));
    return lines;
  }

  status map_error(const http_op& op, std::string& msg) const override {
    std::string code(xml_value(op.body, "Code"));
    if (code.empty()) code = op.error_header;
    if (code.empty()) code = fmt::format("HTTP {}", op.http);
    std::string text(xml_value(op.body, "Message"));
    if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);  // drop RequestId
    status s = status::backend;
    std::string hint;
    if (op.http == 404) {
      s = status::not_found;
      if (code == "ContainerNotFound")
        hint = fmt::format("; create container '{}' first", c_.container);
    } else if (op.http == 403 || op.http == 401) {
      s = status::not_allowed;
      hint = "; check account_name and account_key";
    } else if (op.http == 400 || op.http == 416) {
      s = status::invalid_param;
    }
    msg = fmt::format("{}: HTTP {} {}{}{}{}", describe(op, *this), op.http, code,
                      text.empty() ? "" : ": ", text, hint);
    if (op.attempt > 0) msg += fmt::format(" (after {} attempts)", op.attempt + 1);
    return s;
  }

 private:
  static std::string block_id(std::size_t n) {
    const std::string raw = fmt::format("{:08}", n);
    return base64({reinterpret_cast<const unsigned char*>(raw.data()), raw.size()});
  }

  /// Stage 0 puts the blocks, 1 commits the block list.
  bool block_stage(job& j, const http_config& cfg) {
    const std::string path = object_path(j.key);
    if (j.stage == 0) {
      j.ops.clear();
      std::size_t n = 0;
      for (std::size_t at = 0; at < j.len; at += cfg.part_size, ++n) {
        http_op& op = j.ops.emplace_back();
        op.method = "PUT";
        op.path = path;
        op.query = "comp=block&blockid=" + uri_encode(block_id(n), false);
        op.up = j.mem + at;
        op.up_len = std::min(cfg.part_size, j.len - at);
        op.part = n;
      }
      return true;
    }
    if (j.stage == 1) {
      std::string xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
      for (const http_op& op : j.ops) xml += "<Latest>" + block_id(op.part) + "</Latest>";
      xml += "</BlockList>";
      j.ops.clear();
      http_op& op = j.ops.emplace_back();
      op.method = "PUT";
      op.path = path;
      op.query = "comp=blocklist";
      op.up_text = std::move(xml);
      return true;
    }
    return false;
  }

  azure_blob::config c_;
  std::string key_;
  std::string base_, prefix_;
};

}  // namespace

std::unique_ptr<dialect> make_azure_dialect(const azure_blob::config& cfg) {
  return std::make_unique<azure_dialect>(cfg);
}

}  // namespace nixl::obj::detail
