// The S3 dialect of the object store engine: path-style or virtual-hosted URLs, AWS Signature V4
// on every attempt, multipart upload above the threshold, and S3's error codes.

#include <chrono>

#include <fmt/format.h>
#include <nixl/backends/obj/detail/sigv4.hpp>

#include "internal.hpp"

namespace nixl::obj::detail {
namespace {

constexpr std::string_view empty_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

class s3_dialect final : public dialect {
 public:
  explicit s3_dialect(const obj::config& c) : c_(c) {
    host_ = c_.virtual_addressing ? c_.bucket + "." + c_.endpoint : c_.endpoint;
    base_ = c_.scheme + "://" + host_;
    prefix_ = c_.virtual_addressing ? std::string{} : "/" + uri_encode(c_.bucket, false);
  }

  std::string_view name() const noexcept override { return "OBJ"; }
  const std::string& base_url() const noexcept override { return base_; }
  std::string_view container() const noexcept override { return c_.bucket; }
  std::string_view range_header() const noexcept override { return "Range"; }
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
      case job_kind::head:
      case job_kind::make_bucket:
        if (j.stage > 0) return false;
        j.ops.clear();
        {
          http_op& op = j.ops.emplace_back();
          op.method = j.kind == job_kind::head ? "HEAD" : "PUT";
          op.path = j.kind == job_kind::head ? object_path(j.key) : prefix_ + "/";
          if (c_.virtual_addressing && j.kind == job_kind::make_bucket) op.path = "/";
        }
        return true;
      case job_kind::put:
        return j.len > cfg.multipart_threshold ? multipart_stage(j, cfg) : single_put(j);
      case job_kind::abort_upload: {
        if (j.stage > 0) return false;
        j.ops.clear();
        http_op& op = j.ops.emplace_back();
        op.method = "DELETE";
        op.path = object_path(j.key);
        op.query = "uploadId=" + uri_encode(j.upload_id, false);
        return true;
      }
    }
    return false;
  }

  std::vector<std::string> sign(http_op& op) override {
    const auto now = std::chrono::system_clock::now();
    const std::string date = sigv4::amz_date(
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
    if (op.payload_hash.empty()) {
      if (c_.unsigned_payload && op.method == "PUT")
        op.payload_hash = "UNSIGNED-PAYLOAD";
      else if (op.up_len == 0)
        op.payload_hash = std::string(empty_sha256);
      else
        op.payload_hash = hex(sha256(std::span<const std::byte>(op.up, op.up_len)));
    }
    sigv4::request r;
    r.method = op.method;
    r.path = op.path;
    r.query = op.query;
    r.headers.emplace_back("host", host_);
    r.headers.emplace_back("x-amz-date", date);
    r.headers.emplace_back("x-amz-content-sha256", op.payload_hash);
    if (!c_.session_token.empty()) r.headers.emplace_back("x-amz-security-token", c_.session_token);
    for (const auto& h : op.headers) r.headers.push_back(h);
    r.payload_hash = op.payload_hash;
    sigv4::credentials cr{c_.access_key, c_.secret_key, c_.region, "s3"};
    std::vector<std::string> lines;
    lines.reserve(r.headers.size() + 1);
    for (const auto& [k, v] : r.headers) lines.push_back(k + ": " + v);
    lines.push_back("Authorization: " + sigv4::authorization(r, cr, date));
    return lines;
  }

  status map_error(const http_op& op, std::string& msg) const override {
    std::string code(xml_value(op.body, "Code"));
    std::string text(xml_value(op.body, "Message"));
    if (code.empty()) code = fmt::format("HTTP {}", op.http);
    status s = status::backend;
    std::string hint;
    if (op.http == 404) {
      s = status::not_found;
      if (code == "NoSuchBucket")
        hint = fmt::format("; create bucket '{}' or set bucket / AWS_DEFAULT_BUCKET", c_.bucket);
    } else if (op.http == 403 || op.http == 401) {
      s = status::not_allowed;
      hint = "; check access_key, secret_key, session_token and region";
    } else if (op.http == 400 || op.http == 411 || op.http == 416) {
      s = status::invalid_param;
    }
    msg = fmt::format("{}: HTTP {} {}{}{}{}", describe(op, *this), op.http, code,
                      text.empty() ? "" : ": ", text, hint);
    if (op.attempt > 0) msg += fmt::format(" (after {} attempts)", op.attempt + 1);
    return s;
  }

 private:
  bool single_put(job& j) {
    if (j.stage > 0) return false;
    j.ops.clear();
    http_op& op = j.ops.emplace_back();
    op.method = "PUT";
    op.path = object_path(j.key);
    op.up = j.mem;
    op.up_len = j.len;
    return true;
  }

  /// Stage 0 starts the upload, 1 sends the parts, 2 completes it, 3 reads the answer.
  bool multipart_stage(job& j, const http_config& cfg) {
    const std::string path = object_path(j.key);
    switch (j.stage) {
      case 0: {
        j.ops.clear();
        http_op& op = j.ops.emplace_back();
        op.method = "POST";
        op.path = path;
        op.query = "uploads=";
        op.keep_body = true;
        return true;
      }
      case 1: {
        const std::string_view id = xml_value(j.ops.at(0).body, "UploadId");
        if (id.empty() || id.size() > 1024)
          raise(status::backend, "OBJ POST '{}/{}' ?uploads: no UploadId in the answer", c_.bucket,
                j.key);
        j.upload_id = std::string(id);
        j.ops.clear();
        const std::string uid = uri_encode(j.upload_id, false);
        std::size_t n = 0;
        for (std::size_t at = 0; at < j.len; at += cfg.part_size, ++n) {
          http_op& op = j.ops.emplace_back();
          op.method = "PUT";
          op.path = path;
          op.query = fmt::format("partNumber={}&uploadId={}", n + 1, uid);
          op.up = j.mem + at;
          op.up_len = std::min(cfg.part_size, j.len - at);
          op.part = n;
        }
        return true;
      }
      case 2: {
        std::string xml = "<CompleteMultipartUpload>";
        for (const http_op& op : j.ops) {
          if (op.etag.empty())
            raise(status::backend, "OBJ PUT '{}/{}' part {}: no ETag in the answer", c_.bucket,
                  j.key, op.part + 1);
          xml += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", op.part + 1,
                             op.etag);
        }
        xml += "</CompleteMultipartUpload>";
        j.ops.clear();
        http_op& op = j.ops.emplace_back();
        op.method = "POST";
        op.path = path;
        op.query = "uploadId=" + uri_encode(j.upload_id, false);
        op.up_text = std::move(xml);
        op.keep_body = true;
        op.headers.emplace_back("Content-Type", "application/xml");
        return true;
      }
      default: {
        // S3 may answer 200 and still report an error in the body.
        const std::string& body = j.ops.at(0).body;
        if (body.find("<Error>") != std::string::npos)
          raise(status::backend, "OBJ POST '{}/{}' complete multipart upload: {}: {}", c_.bucket,
                j.key, xml_value(body, "Code"), xml_value(body, "Message"));
        return false;
      }
    }
  }

  obj::config c_;
  std::string host_, base_, prefix_;
};

}  // namespace

std::unique_ptr<dialect> make_s3_dialect(const obj::config& cfg) {
  return std::make_unique<s3_dialect>(cfg);
}

}  // namespace nixl::obj::detail
