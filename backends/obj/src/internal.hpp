// Internals of the object store engine, shared by engine.cpp and the dialects (s3.cpp,
// azure.cpp): an HTTP operation, a job (one object operation, in stages), a request, and the
// dialect interface through which the engine asks a store for URLs, signatures and the meaning
// of its errors.
#pragma once

#include <atomic>
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

enum class phase : int { idle, running, done, failed, canceled };

struct xfer {
  engine* eng = nullptr;
  std::vector<job> jobs;
  std::atomic<phase> ph{phase::idle};
  // Written by the engine's thread while running; read by others once `ph` says it ended.
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

/// What a store adds to the HTTP layer.
class dialect {
 public:
  virtual ~dialect() = default;
  virtual std::string_view name() const noexcept = 0;
  /// "http://host:port", what paths are appended to.
  virtual const std::string& base_url() const noexcept = 0;
  /// The path of an object ("/bucket/key" or the store's form).
  virtual std::string object_path(std::string_view key) const = 0;
  /// Header naming a byte range ("Range" or "x-ms-range").
  virtual std::string_view range_header() const noexcept = 0;
  /// Fills `j.ops` for stage `j.stage` (reading the previous stage's answers from `j.ops`);
  /// returns false when the job has no further stage. Throws `nixl::error` with the reason
  /// when an answer is unusable.
  virtual bool build_stage(job& j, const http_config& cfg) = 0;
  /// The header lines ("Name: value") to send for this attempt, signature included.
  virtual std::vector<std::string> sign(http_op& op) = 0;
  /// The status and message of a failed answer (`op.http` >= 300), with the server's words.
  virtual status map_error(const http_op& op, std::string& msg) const = 0;
  /// The bucket or container: what messages name.
  virtual std::string_view container() const noexcept = 0;
};

/// Adds GET operations for `j`'s range: one, or one per `part_size` above the threshold.
void add_get_ops(job& j, const dialect& d, const http_config& cfg);
/// The text between <tag> and </tag> in `xml`, or empty.
std::string_view xml_value(std::string_view xml, std::string_view tag) noexcept;
/// `op`'s method and what it was for, for messages ("GET 'bucket/key' bytes 0-99").
std::string describe(const http_op& op, const dialect& d);

std::unique_ptr<dialect> make_s3_dialect(const obj::config& cfg);
std::unique_ptr<dialect> make_azure_dialect(const azure_blob::config& cfg);

}  // namespace nixl::obj::detail
