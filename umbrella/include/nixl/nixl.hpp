#pragma once
/// `#include <nixl/nixl.hpp>`: the core, and every component this program links — the UCX,
/// POSIX, CUDA, GDS and GDS_MT, LIBFABRIC, OBJ and AZURE_BLOB backends, the metadata exchange
/// and the Prometheus exporter — each present when its CMake target (`nixl::ucx`,
/// `nixl::posix`, `nixl::cuda`, `nixl::gds`, `nixl::libfabric`, `nixl::obj`, `nixl::metadata`,
/// `nixl::prometheus`, or `nixl::nixl` for all of them) is linked, which defines
/// `NIXL_HAS_<NAME>`.
///
///   nixl::enabled_backends             // detail::type_list of the linked backends
///   nixl::agent_over<enabled_backends> // an agent over all of them
///
/// This header lives outside include/nixl/ (the core), which includes no component.

#include <nixl/agent.hpp>
#include <nixl/agent_config.hpp>
#include <nixl/concepts.hpp>
#include <nixl/log.hpp>
#include <nixl/memory.hpp>
#include <nixl/metadata.hpp>
#include <nixl/prepared.hpp>
#include <nixl/request.hpp>
#include <nixl/status.hpp>
#include <nixl/telemetry.hpp>
#include <nixl/xfer_request.hpp>

#if defined(NIXL_HAS_UCX)
#include <nixl/backends/ucx.hpp>
#endif
#if defined(NIXL_HAS_POSIX)
#include <nixl/backends/posix.hpp>
#endif
#if defined(NIXL_HAS_CUDA)
#include <nixl/backends/cuda.hpp>
#endif
#if defined(NIXL_HAS_GDS)
#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>
#endif
#if defined(NIXL_HAS_LIBFABRIC)
#include <nixl/backends/libfabric.hpp>
#endif
#if defined(NIXL_HAS_OBJ)
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>
#endif
#if defined(NIXL_HAS_METADATA)
#include <nixl/metadata/exchange.hpp>
#endif
#if defined(NIXL_HAS_PROMETHEUS)
#include <nixl/telemetry/prometheus.hpp>
#endif

namespace nixl {

namespace detail {
template <class... Lists>
struct concat;
template <class... A>
struct concat<type_list<A...>> {
  using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct concat<type_list<A...>, type_list<B...>, Rest...> : concat<type_list<A..., B...>, Rest...> {
};

template <class List>
struct agent_over;
template <class... B>
struct agent_over<type_list<B...>> {
  static_assert(
      sizeof...(B) > 0,
      "no backend is linked; link a backend's target (nixl::ucx, nixl::posix, nixl::cuda, "
      "nixl::gds, nixl::libfabric, nixl::obj) or nixl::nixl");
  using type = agent<B...>;
};

}  // namespace detail

/// The backends this program links, in the order UCX, POSIX, CUDA, GDS, GDS_MT, LIBFABRIC, OBJ,
/// AZURE_BLOB.
// clang-format off
using enabled_backends = typename detail::concat<
#if defined(NIXL_HAS_UCX)
    detail::type_list<ucx::backend>,
#endif
#if defined(NIXL_HAS_POSIX)
    detail::type_list<posix::backend>,
#endif
#if defined(NIXL_HAS_CUDA)
    detail::type_list<cuda::backend>,
#endif
#if defined(NIXL_HAS_GDS)
    detail::type_list<gds::backend, gds_mt::backend>,
#endif
#if defined(NIXL_HAS_LIBFABRIC)
    detail::type_list<libfabric::backend>,
#endif
#if defined(NIXL_HAS_OBJ)
    detail::type_list<obj::backend, azure_blob::backend>,
#endif
    detail::type_list<>>::type;
// clang-format on

/// `agent<B...>` for a `detail::type_list<B...>`: `nixl::agent_over<nixl::enabled_backends>`.
template <class List>
using agent_over = typename detail::agent_over<List>::type;

}  // namespace nixl
