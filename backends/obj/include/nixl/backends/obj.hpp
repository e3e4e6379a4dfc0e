#pragma once
/// The OBJ backend: DRAM or VRAM <-> objects of an S3 or S3-compatible store (AWS, MinIO, s3rver),
/// requests signed with AWS Signature V4, over libcurl and OpenSSL. Local only: an agent
/// transfers to itself, with the object list on the remote side (NIXL's loopback storage use).
///
/// An object is registered with kind object; its key is the registration's `meta` when not
/// empty, else the decimal `dev`. In a transfer the object descriptor's `dev` selects the
/// object and its `addr` is the offset inside it; the length is the memory descriptor's. WRITE
/// puts whole objects (multipart above `multipart_threshold`), READ gets byte ranges.
/// `query_memory` is a HEAD per object. VRAM goes through a bounded pool of pinned host memory
/// (`vram_staging_bytes`) with the CUDA driver loaded at run time; without the driver a VRAM
/// registration fails with `not_supported`. Parameters: obj/config.hpp; docs/obj.md.

#include <string_view>

#include <nixl/backends/obj/config.hpp>
#include <nixl/backends/obj/detail/backend.hpp>
#include <nixl/detail/backend_checks.hpp>

namespace nixl::obj {

namespace detail {
struct s3_traits {
  static constexpr std::string_view name = "OBJ";
  using config = obj::config;
  static store_ptr make_store(const config& c, const nixl::backend_context& ctx) {
    return make_s3_store(c, ctx);
  }
};
}  // namespace detail

/// The OBJ backend (NIXL name "OBJ"): DRAM or VRAM <-> S3 objects.
using backend = detail::basic_backend<detail::s3_traits>;

static_assert(nixl::storage_backend<backend>);
static_assert(nixl::backend_for_all<backend, route<dram_t, object_t>, route<object_t, dram_t>,
                                    route<vram_t, object_t>, route<object_t, vram_t>>);
static_assert(nixl::backend_for_none<backend, route<dram_t, dram_t>, route<vram_t, dram_t>>);

}  // namespace nixl::obj
