#pragma once
/// The AZURE_BLOB backend: DRAM or VRAM <-> block blobs of Azure Blob Storage (or azurite),
/// requests signed with Shared Key, on the same HTTP layer as OBJ (obj/detail/store.hpp).
/// Registration and transfers as for OBJ: the blob's name is `meta`, else the decimal `dev`; WRITE
/// puts whole blobs (blocks and a block list above `multipart_threshold`), READ gets byte ranges.
/// Parameters: obj/config.hpp; docs/obj.md.

#include <string_view>

#include <nixl/backends/obj/config.hpp>
#include <nixl/backends/obj/detail/backend.hpp>
#include <nixl/detail/backend_checks.hpp>

namespace nixl::azure_blob {

namespace detail {
struct azure_traits {
  static constexpr std::string_view name = "AZURE_BLOB";
  using config = azure_blob::config;
  static obj::detail::store_ptr make_store(const config& c, const nixl::backend_context& ctx) {
    return obj::detail::make_azure_store(c, ctx);
  }
};
}  // namespace detail

/// The AZURE_BLOB backend (NIXL name "AZURE_BLOB"): DRAM or VRAM <-> Azure block blobs.
using backend = obj::detail::basic_backend<detail::azure_traits>;

static_assert(nixl::storage_backend<backend>);
static_assert(nixl::backend_for_all<backend, route<dram_t, object_t>, route<vram_t, object_t>,
                                    route<object_t, vram_t>>);

}  // namespace nixl::azure_blob
