// The S3 dialect of the object store engine: path-style or virtual-hosted URLs, AWS Signature V4
// on every attempt, multipart upload above the threshold, and S3's error hints.

#include <chrono>

#include <fmt/format.h>
#include <nixl/backends/obj/detail/sigv4.hpp>

#include "internal.hpp"

namespace nixl::obj::detail {
namespace {

constexpr std::string_view empty_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string host_of(const obj::config& c) {
  return c.virtual_addressing ? c.bucket + "." + c.endpoint : c.endpoint;
}

class s3_dialect final : public dialect {
 public:
  explicit s3_dialect(const obj::config& c)
      : dialect("OBJ", c.scheme + "://" + host_of(c), c.bucket,
                c.virtual_addressing ? std::string{} : "/" + uri_encode(c.bucket, false), "Range"),
        c_(c),
        host_(host_of(c)) {}

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
    std::vector<std::string> lines = header_lines(r.headers);
    lines.push_back("Authorization: " + sigv4::authorization(r, cr, date));
    return lines;
  }

 private:
  void container_op(job& j) const override { only_op(j, "PUT", prefix_ + "/"); }

  bool abort_op(job& j) const override {
    only_op(j, "DELETE", object_path(j.key), "uploadId=" + uri_encode(j.upload_id, false));
    return true;
  }

  std::string hint(status s, std::string_view code) const override {
    if (s == status::not_found && code == "NoSuchBucket")
      return fmt::format("; create bucket '{}' or set bucket / AWS_DEFAULT_BUCKET", c_.bucket);
    if (s == status::not_allowed) return "; check access_key, secret_key, session_token and region";
    return {};
  }

  /// Stage 0 starts the upload, 1 sends the parts, 2 completes it, 3 reads the answer.
  bool upload_stage(job& j, const http_config& cfg) override {
    switch (j.stage) {
      case 0:
        only_op(j, "POST", object_path(j.key), "uploads=").keep_body = true;
        return true;
      case 1: {
        const std::string_view id = xml_value(j.ops.at(0).body, "UploadId");
        if (id.empty() || id.size() > 1024)
          raise(status::backend, "OBJ POST '{}/{}' ?uploads: no UploadId in the answer", c_.bucket,
                j.key);
        j.upload_id = std::string(id);
        const std::string uid = uri_encode(j.upload_id, false);
        add_part_ops(j, cfg, [&](std::size_t n) {
          return fmt::format("partNumber={}&uploadId={}", n + 1, uid);
        });
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
        http_op& op =
            only_op(j, "POST", object_path(j.key), "uploadId=" + uri_encode(j.upload_id, false));
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
  std::string host_;
};

}  // namespace

std::unique_ptr<dialect> make_s3_dialect(const obj::config& cfg) {
  return std::make_unique<s3_dialect>(cfg);
}

}  // namespace nixl::obj::detail
