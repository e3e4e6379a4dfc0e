#pragma once
/// `#include <nixl/nixl.hpp>`: the core, and every component this program links — the UCX,
/// POSIX and CUDA backends and the metadata exchange — each present when its CMake target
/// (`nixl::ucx`, ..., or `nixl::nixl` for all of them) is linked, which defines
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
  static_assert(sizeof...(B) > 0,
                "no backend is linked; link nixl::ucx, nixl::posix or nixl::cuda (or nixl::nixl)");
  using type = agent<B...>;
};

#if defined(NIXL_HAS_UCX)
using enabled_ucx = type_list<ucx::backend>;
#else
using enabled_ucx = type_list<>;
#endif
#if defined(NIXL_HAS_POSIX)
using enabled_posix = type_list<posix::backend>;
#else
using enabled_posix = type_list<>;
#endif
#if defined(NIXL_HAS_CUDA)
using enabled_cuda = type_list<cuda::backend>;
#else
using enabled_cuda = type_list<>;
#endif
#if defined(NIXL_HAS_GDS)
using enabled_gds = type_list<gds::backend, gds_mt::backend>;
#else
using enabled_gds = type_list<>;
#endif
#if defined(NIXL_HAS_LIBFABRIC)
using enabled_libfabric = type_list<libfabric::backend>;
#else
using enabled_libfabric = type_list<>;
#endif
#if defined(NIXL_HAS_OBJ)
using enabled_obj = type_list<obj::backend, azure_blob::backend>;
#else
using enabled_obj = type_list<>;
#endif
}  // namespace detail

/// The backends this program links, in the order UCX, POSIX, CUDA, GDS, GDS_MT, LIBFABRIC, OBJ,
/// AZURE_BLOB.
using enabled_backends =
    typename detail::concat<detail::enabled_ucx, detail::enabled_posix, detail::enabled_cuda,
                            detail::enabled_gds, detail::enabled_libfabric,
                            detail::enabled_obj>::type;

/// `agent<B...>` for a `detail::type_list<B...>`: `nixl::agent_over<nixl::enabled_backends>`.
template <class List>
using agent_over = typename detail::agent_over<List>::type;

}  // namespace nixl
