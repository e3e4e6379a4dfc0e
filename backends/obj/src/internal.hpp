// Internals of the object store engine, shared by engine.cpp and the dialects (s3.cpp,
// azure.cpp): an HTTP operation, a job (one object operation, in stages), a request, and the
// dialect interface through which the engine asks a store for URLs, signatures and the meaning
// of its errors.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/backends/obj/config.hpp>
#include <nixl/backends/obj/detail/store.hpp>
#include <nixl/detail/completion.hpp>

struct curl_slist;

namespace nixl::obj::detail {

using clock = std::chrono::steady_clock;
class engine;
struct job;

/// Bytes of an error answer (or of an XML answer the dialect reads) kept per operation.
inline constexpr std::size_t max_body = 64u << 10;

/// One HTTP request and its retries.
struct http_op {
  job* owner = nullptr;
  std::string method;                                        // GET PUT POST HEAD DELETE
  std::string path;                                          // percent-encoded, starting with '/'
  std::string query;                                         // percent-encoded, without '?'
  std::vector<std::pair<std::string, std::string>> headers;  // besides those the signer adds
  const std::byte* up = nullptr;                             // request body
  std::size_t up_len = 0;
  std::string up_text;            // an owned body (XML); `up` points into it
  std::byte* down = nullptr;      // where a 2xx answer's body goes
  std::size_t down_cap = 0;       // bytes expected there
  bool keep_body = false;         // keep a 2xx body in `body` (XML answers)
  std::uint64_t range_begin = 0;  // for messages
  std::size_t part = 0;           // part or block number (from 0)
  std::string payload_hash;       // cached across retries (S3)
  // VRAM: the GPU bytes this body or answer belongs to, and the pinned staging chunk that
  // stands in for them (held from before the first attempt to after the last).
  std::byte* gpu_mem = nullptr;
  std::size_t gpu_len = 0;
  bool gpu_put = false;  // GPU -> staging before sending; else staging -> GPU after a 2xx
  std::byte* staging = nullptr;
  // Results of the last attempt.
  std::size_t up_pos = 0, down_len = 0;
  bool overflow = false;
  long http = 0;
  int curl_code = 0;
  std::string curl_error;
  std::string body;
  std::string etag, error_header, content_length, last_modified;
  // Scheduling.
  unsigned attempt = 0;
  clock::time_point deadline{}, not_before{};
  void* easy = nullptr;
  curl_slist* slist = nullptr;

  void reset_results() noexcept;
};

/// `abort_upload` gives up the multipart upload `upload_id` of a write that failed.
enum class job_kind : std::uint8_t { get, put, head, make_bucket, abort_upload };

/// One object operation; the dialect turns it into stages of HTTP operations (a PUT, or the
/// steps of a multipart upload).
struct job {
  struct xfer* owner = nullptr;
  job_kind kind = job_kind::get;
  std::string key;
  std::byte* mem = nullptr;
  std::uint64_t offset = 0;
  std::size_t len = 0;
  int gpu = -1;  // the CUDA device of `mem` when it is VRAM, else -1
  int stage = 0;
  std::vector<http_op> ops;  // the current stage's
  std::size_t ops_left = 0;
  std::string upload_id;
  bool found = false;  // head
  nixl::params info;   // head
};

/// One request: busy from its post until the engine's thread ends it, done with `success`,
/// `canceled` or the failure's status.
struct xfer {
  engine* eng = nullptr;
  std::vector<job> jobs;
  nixl::detail::completion state;
  // Written by the engine's thread while busy (the status it ends with, and why); read by
  // others once `state` says it ended.
  status result = status::success;
  std::string error;
  // Engine thread only.
  std::size_t jobs_left = 0;
  std::size_t ops_active = 0;
  bool failing = false;
  xfer* next_submit = nullptr;
  xfer* next_cancel = nullptr;
  bool cancel_queued = false;
  // check() only.
  bool reported = false;
};

/// The request shape every store shares (request.cpp): URLs of a container and its objects,
/// HEAD, GET by ranges, whole-object PUT, uploads in parts, and the reading of error answers.
/// A store (s3.cpp, azure.cpp) fills in its names and adds its signing, its multipart protocol
/// and the hints of its errors.
class dialect {
 public:
  virtual ~dialect() = default;
  std::string_view name() const noexcept { return name_; }
  /// "http://host:port", what paths are appended to.
  const std::string& base_url() const noexcept { return base_; }
  /// The bucket or container: what messages name.
  std::string_view container() const noexcept { return container_; }
  /// The path of an object: the container's path, "/", the percent-encoded key.
  std::string object_path(std::string_view key) const;
  /// Fills `j.ops` for stage `j.stage` (reading the previous stage's answers from `j.ops`);
  /// returns false when the job has no further stage. Throws `nixl::error` with the reason
  /// when an answer is unusable.
  bool build_stage(job& j, const http_config& cfg);
  /// The status and message of a failed answer (`op.http` >= 300), with the server's words:
  /// the code and message of its XML body (or of its error header), and the store's hint.
  status map_error(const http_op& op, std::string& msg) const;

  /// The header lines ("Name: value") to send for this attempt, signature included.
  virtual std::vector<std::string> sign(http_op& op) = 0;

 protected:
  /// A store's names: its backend name, base URL, container, the container's path (objects
  /// lie below it) and the header of a byte range ("Range" or "x-ms-range").
  dialect(std::string_view name, std::string base, std::string container, std::string prefix,
          std::string_view range_header)
      : name_(name),
        base_(std::move(base)),
        container_(std::move(container)),
        prefix_(std::move(prefix)),
        range_header_(range_header) {}

  /// Starts a stage of one operation (clearing the last stage's).
  static http_op& only_op(job& j, std::string method, std::string path, std::string query = {});
  /// Adds one PUT per `cfg.part_size` bytes of the job's memory, the query of part n (from 0)
  /// given by `query(n)`, after clearing the last stage's.
  template <class Query>
  void add_part_ops(job& j, const http_config& cfg, Query&& query) const {
    j.ops.clear();
    const std::string path = object_path(j.key);
    std::size_t n = 0;
    for (std::size_t at = 0; at < j.len; at += cfg.part_size, ++n) {
      http_op& op = j.ops.emplace_back();
      op.method = "PUT";
      op.path = path;
      op.query = query(n);
      op.up = j.mem + at;
      op.up_len = std::min(cfg.part_size, j.len - at);
      op.part = n;
    }
  }
  /// Adds GET operations for `j`'s range: one, or one per `part_size` above the threshold.
  void add_get_ops(job& j, const http_config& cfg) const;
  /// `headers` as lines "Name: value".
  static std::vector<std::string> header_lines(
      const std::vector<std::pair<std::string, std::string>>& headers);

  /// The operation that creates the container.
  virtual void container_op(job& j) const = 0;
  /// Stages of a PUT above the multipart threshold.
  virtual bool upload_stage(job& j, const http_config& cfg) = 0;
  /// Headers of a whole-object PUT besides those the signer adds.
  virtual void put_headers(http_op&) const {}
  /// The operation that gives up a failed upload; false when the store needs none.
  virtual bool abort_op(job&) const { return false; }
  /// What to add to the message of an error answer: "; <the fix>", or empty.
  virtual std::string hint(status s, std::string_view code) const = 0;

  std::string name_, base_, container_, prefix_, range_header_;
};

/// The text between <tag> and </tag> in `xml`, or empty.
std::string_view xml_value(std::string_view xml, std::string_view tag) noexcept;
/// `op`'s method and what it was for, for messages ("GET 'bucket/key' bytes 0-99").
std::string describe(const http_op& op, const dialect& d);

std::unique_ptr<dialect> make_s3_dialect(const obj::config& cfg);
std::unique_ptr<dialect> make_azure_dialect(const azure_blob::config& cfg);

}  // namespace nixl::obj::detail
