// Concepts hold for conforming types and fail for types that miss a piece.
#include <array>

#include <nixl/concepts.hpp>

#include "nixl_test/catch.hpp"
#include "nixl_test/memcpy_backend.hpp"

namespace {
// Everything but post.
struct no_post {
  static constexpr std::string_view name = "NOPOST";
  using memory_kinds = nixl::kind_list<nixl::dram_t>;
  struct config {
    static config from_params(const nixl::params&) { return {}; }
  };
  static nixl::params default_params() { return {}; }
  struct region {};
  struct remote_region {};
  struct peer {};
  struct request {};
  no_post(const config&, const nixl::backend_context&) {}
  region register_region(nixl::mem_kind, const nixl::reg_desc&) { return {}; }
  void deregister_region(region&) noexcept {}
  void prepare(request&, nixl::xfer_op, std::span<const nixl::bound_desc<region>>,
               std::span<const nixl::bound_desc<remote_region>>, peer&) {}
  nixl::status check(request&) noexcept { return nixl::status::success; }
  nixl::status release(request&) noexcept { return nixl::status::success; }
};
// A post that may throw is not a backend: the hot path is noexcept.
struct throwing_post : no_post {
  using no_post::no_post;
  nixl::status post(request&, nixl::notif_arg) { return nixl::status::success; }
};
struct good : no_post {
  using no_post::no_post;
  nixl::status post(request&, nixl::notif_arg) noexcept { return nixl::status::success; }
};
struct bad_kinds : good {
  using good::good;
  using memory_kinds = int;
};
}  // namespace

TEST_CASE("backend concept, both ways") {
  STATIC_REQUIRE(nixl::backend<good>);
  STATIC_REQUIRE_FALSE(nixl::backend<no_post>);
  STATIC_REQUIRE_FALSE(nixl::backend<throwing_post>);
  STATIC_REQUIRE_FALSE(nixl::backend<bad_kinds>);
  STATIC_REQUIRE_FALSE(nixl::backend<int>);
}

/// remote_backend, notifying_backend, loopback_backend.
template <class B>
constexpr std::array<bool, 3> layers{nixl::remote_backend<B>, nixl::notifying_backend<B>,
                                     nixl::loopback_backend<B>};
/// backend_for dram -> dram, dram -> file, file -> dram.
template <class B>
constexpr std::array<bool, 3> pairs{nixl::backend_for<B, nixl::dram_t, nixl::dram_t>,
                                    nixl::backend_for<B, nixl::dram_t, nixl::file_t>,
                                    nixl::backend_for<B, nixl::file_t, nixl::dram_t>};

TEST_CASE("layered concepts") {
  using nixl::test::file_backend;
  using nixl::test::memcpy_backend;
  STATIC_REQUIRE(layers<memcpy_backend> == std::array{true, true, true});
  STATIC_REQUIRE(layers<good> == std::array{false, false, false});
  STATIC_REQUIRE(layers<file_backend> == std::array{false, false, true});
}

TEST_CASE("backend_for follows memory_kinds and can_move") {
  using nixl::test::file_backend;
  using nixl::test::memcpy_backend;
  STATIC_REQUIRE(pairs<memcpy_backend> == std::array{true, false, false});
  STATIC_REQUIRE(pairs<file_backend> == std::array{false, true, false});
  STATIC_REQUIRE(nixl::moves<file_backend>(nixl::mem_kind::dram, nixl::mem_kind::file));
  STATIC_REQUIRE_FALSE(nixl::moves<file_backend>(nixl::mem_kind::vram, nixl::mem_kind::file));
}
