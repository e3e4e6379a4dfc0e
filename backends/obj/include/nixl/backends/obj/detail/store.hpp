#pragma once
/// The shared part of the object store backends, behind an opaque handle: one HTTP engine (a
/// thread driving libcurl multi: connections reused, many requests in flight, a deadline per
/// request, retries with back-off) and the store's dialect (its URLs, signing, error mapping).
/// `basic_backend` (backend.hpp) is the NIXL backend over it; OBJ and AZURE_BLOB differ only in
/// the dialect their `make_*_store` gives.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/concepts.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::obj {
struct config;
}
namespace nixl::azure_blob {
struct config;
}

namespace nixl::obj::detail {

class store;
struct xfer;

struct store_deleter {
  void operator()(store*) const noexcept;
};
struct xfer_deleter {
  void operator()(xfer*) const noexcept;
};
using store_ptr = std::unique_ptr<store, store_deleter>;
using xfer_ptr = std::unique_ptr<xfer, xfer_deleter>;

/// One object operation of a request: write `len` bytes at `mem` as the whole object `key`, or
/// read `len` bytes from `offset` of `key` into `mem`.
struct object_io {
  bool write = false;
  std::string key;
  std::byte* mem = nullptr;
  std::uint64_t offset = 0;
  std::size_t len = 0;
  int gpu = -1;  ///< `mem` is VRAM of this CUDA device (from `attach_vram`); -1: host memory
};

/// Starts the engine for S3 (`OBJ`) or Azure Blob (`AZURE_BLOB`). Throws `nixl::error(backend)`
/// when libcurl cannot start.
store_ptr make_s3_store(const obj::config&, const nixl::backend_context&);
store_ptr make_azure_store(const azure_blob::config&, const nixl::backend_context&);

/// Checks a VRAM registration and readies its device and the pinned staging pool; returns the
/// device ordinal for `object_io::gpu`. Throws `nixl::error(not_supported)` without a CUDA
/// driver or device ("VRAM needs the CUDA driver (libcuda.so.1), not found"),
/// `nixl::error(invalid_param)` for memory that is not GPU memory or a pool smaller than one
/// HTTP body, `nixl::error(backend)` with the CUDA error string when the driver fails.
int attach_vram(store&, const nixl::reg_desc&);

/// The store's NIXL name ("OBJ", "AZURE_BLOB").
std::string_view store_name(const store&) noexcept;

/// A request's state for `ios`, reused across posts. Throws `nixl::error(invalid_param)` for a
/// write at an offset other than 0.
xfer_ptr make_xfer(store&, std::vector<object_io> ios);

/// Queues the request on the engine's thread (`in_progress`), or `repost_active`.
status post(store&, xfer&) noexcept;
/// `in_progress`, `success`, or the failure's status (its message logged once). A check of a
/// request in flight counts as the application polling (posts then leave the thread's wake-up
/// to the next check: docs/obj.md, "Posting").
status check(store&, xfer&) noexcept;
/// True while the engine's thread counts an application thread as polling.
bool polled(const store&) noexcept;
/// Cancels what is queued or in flight and waits until the engine let go of it.
status release(store&, xfer&) noexcept;
/// The last failure's message: what the server said, or why the request did not reach it.
std::string_view error_text(const xfer&) noexcept;

/// HEAD of each object named by `meta` (else the decimal `dev`): {size, etag, last_modified}
/// or nullopt when it does not exist. Throws `nixl::error` with the server's message otherwise.
std::vector<std::optional<nixl::params>> query(store&, std::span<const nixl::reg_desc>);

/// What the engine sent since it started.
struct store_stats {
  std::uint64_t attempts = 0;  ///< HTTP requests sent, retries included
  std::uint64_t retries = 0;   ///< of those, retries after a retryable answer or transport error
};
store_stats stats(const store&) noexcept;

/// Creates the bucket (OBJ) or container (AZURE_BLOB) when it does not exist yet. Throws
/// `nixl::error` with the server's message when it cannot.
void create_bucket(store&);

}  // namespace nixl::obj::detail
