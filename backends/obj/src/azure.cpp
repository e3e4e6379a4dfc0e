// The Azure Blob dialect of the object store engine: account/container URLs (path-style for
// azurite), Shared Key on every attempt, block blobs (Put Blob, or Put Block + Put Block List
// above the threshold), and Azure's error hints.

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
      : dialect("AZURE_BLOB", c.scheme + "://" + c.host, c.container,
                c.path_prefix + "/" + uri_encode(c.container, false), "x-ms-range"),
        c_(c),
        key_(unbase64(c.account_key, "AZURE_BLOB account_key")) {}

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
    std::vector<std::string> lines = header_lines(r.headers);
    // Signed as curl sends them: a length for bodies, and no Content-Type unless given.
    if (op.method == "PUT" || op.method == "POST")
      r.headers.emplace_back("Content-Length", std::to_string(op.up_len));
    lines.push_back("Content-Type:");
    lines.push_back("Authorization: " + shared_key::authorization(r, key_));
    return lines;
  }

 private:
  void container_op(job& j) const override { only_op(j, "PUT", prefix_, "restype=container"); }

  void put_headers(http_op& op) const override {
    op.headers.emplace_back("x-ms-blob-type", "BlockBlob");
  }

  // abort_op: none; uncommitted blocks are dropped by the service itself.

  std::string hint(status s, std::string_view code) const override {
    if (s == status::not_found && code == "ContainerNotFound")
      return fmt::format("; create container '{}' first", c_.container);
    if (s == status::not_allowed) return "; check account_name and account_key";
    return {};
  }

  static std::string block_id(std::size_t n) {
    const std::string raw = fmt::format("{:08}", n);
    return base64({reinterpret_cast<const unsigned char*>(raw.data()), raw.size()});
  }

  /// Stage 0 puts the blocks, 1 commits the block list.
  bool upload_stage(job& j, const http_config& cfg) override {
    if (j.stage == 0) {
      add_part_ops(j, cfg, [](std::size_t n) {
        return "comp=block&blockid=" + uri_encode(block_id(n), false);
      });
      return true;
    }
    if (j.stage == 1) {
      std::string xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
      for (const http_op& op : j.ops) xml += "<Latest>" + block_id(op.part) + "</Latest>";
      xml += "</BlockList>";
      only_op(j, "PUT", object_path(j.key), "comp=blocklist").up_text = std::move(xml);
      return true;
    }
    return false;
  }

  azure_blob::config c_;
  std::string key_;
};

}  // namespace

std::unique_ptr<dialect> make_azure_dialect(const azure_blob::config& cfg) {
  return std::make_unique<azure_dialect>(cfg);
}

}  // namespace nixl::obj::detail
