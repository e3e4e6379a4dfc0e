# Finds the UCX the UCX backend builds against: imported targets ucx::ucp, ucx::uct, ucx::ucs.
#
# Where, in this order:
#   -DNIXL_UCX_ROOT=<prefix>     only that prefix (e.g. /usr for Debian's UCX 1.13)
#   -Ducx_DIR=<dir> / ucx_ROOT / CMAKE_PREFIX_PATH, as set by the user or a consumer
#   /opt/nixl/ucx-1.22.0         what scripts/build-ucx.sh (and install-deps.sh) builds
#   the system's UCX             Debian: libucx-dev (1.13.1)
#
# Sets NIXL_UCX_VERSION, NIXL_UCX_LIBDIR (where libucp is), NIXL_UCX_MODULE_DIR (its transport
# modules), NIXL_UCX_CUDA (1 when the CUDA transport module libuct_cuda is among them),
# NIXL_UCX_RDMA_MODULES (which of UCX's RDMA modules ib, ib_mlx5, efa, rdmacm are there) and
# NIXL_UCX_CONFIG_DIR (the ucx-config.cmake found; the installed nixl config looks there first).
# Binaries link the libraries by full path, so the build tree's RPATH points at that prefix;
# installed ones keep it (CMAKE_INSTALL_RPATH_USE_LINK_PATH) instead of falling back to /usr/lib.

set(NIXL_UCX_DEFAULT_ROOT /opt/nixl/ucx-1.22.0)
set(NIXL_UCX_ROOT "" CACHE PATH
    "UCX prefix to build against, searched alone (e.g. /usr for Debian's UCX); empty: \
${NIXL_UCX_DEFAULT_ROOT} when it holds a build, else the usual search")
# A changed NIXL_UCX_ROOT must not be shadowed by the ucx_DIR cached from the previous search.
if(DEFINED _NIXL_UCX_ROOT_USED AND NOT "${NIXL_UCX_ROOT}" STREQUAL "${_NIXL_UCX_ROOT_USED}")
  unset(ucx_DIR CACHE)
endif()
set(_NIXL_UCX_ROOT_USED "${NIXL_UCX_ROOT}" CACHE INTERNAL "NIXL_UCX_ROOT of the last search")

if(NIXL_UCX_ROOT)
  find_package(ucx CONFIG PATHS ${NIXL_UCX_ROOT} NO_DEFAULT_PATH)
  if(NOT ucx_FOUND)
    message(FATAL_ERROR "NIXL_UCX_ROOT=${NIXL_UCX_ROOT}: no UCX CMake package (ucx-config.cmake) "
                        "under it; point it at a UCX install prefix (/usr for libucx-dev, "
                        "${NIXL_UCX_DEFAULT_ROOT} after scripts/build-ucx.sh)")
  endif()
else()
  find_package(ucx CONFIG HINTS ${NIXL_UCX_DEFAULT_ROOT})
  if(NOT ucx_FOUND)
    message(FATAL_ERROR "UCX not found: run scripts/build-ucx.sh (UCX 1.22 into "
                        "${NIXL_UCX_DEFAULT_ROOT}) or install libucx-dev, or set NIXL_UCX_ROOT, "
                        "or turn NIXL_WITH_UCX off")
  endif()
endif()

get_target_property(_nixl_ucp_lib ucx::ucp IMPORTED_LOCATION)
if(NOT _nixl_ucp_lib)
  get_target_property(_nixl_ucp_lib ucx::ucp IMPORTED_LOCATION_RELEASE)
endif()
get_filename_component(_nixl_ucp_lib "${_nixl_ucp_lib}" REALPATH)
get_filename_component(NIXL_UCX_LIBDIR "${_nixl_ucp_lib}" DIRECTORY)
set(NIXL_UCX_MODULE_DIR "${NIXL_UCX_LIBDIR}/ucx")
set(NIXL_UCX_VERSION "${ucx_VERSION}")
set(NIXL_UCX_CONFIG_DIR "${ucx_DIR}")
file(GLOB _nixl_ucx_cuda_mod "${NIXL_UCX_MODULE_DIR}/libuct_cuda.so*")
if(_nixl_ucx_cuda_mod)
  set(NIXL_UCX_CUDA 1)
else()
  set(NIXL_UCX_CUDA 0)
endif()
if(NIXL_UCX_CUDA)
  set(_nixl_cuda_word "yes")
else()
  set(_nixl_cuda_word "no")
endif()
# RDMA: libuct_ib (rc_verbs, ud_verbs; in older UCX such as 1.13 also the mlx5 transports),
# libuct_ib_mlx5 (rc/ud/dc_mlx5), libuct_ib_efa (srd), libuct_rdmacm (the rdmacm connection
# manager). Where no RDMA device exists they load and offer no transport.
set(NIXL_UCX_RDMA_MODULES "")
foreach(_m ib ib_mlx5 ib_efa rdmacm)
  if(EXISTS "${NIXL_UCX_MODULE_DIR}/libuct_${_m}.so")
    string(REGEX REPLACE "^ib_efa$" "efa" _m "${_m}")
    list(APPEND NIXL_UCX_RDMA_MODULES ${_m})
  endif()
endforeach()
if(NIXL_UCX_RDMA_MODULES)
  string(REPLACE ";" " " _nixl_rdma_word "${NIXL_UCX_RDMA_MODULES}")
else()
  set(_nixl_rdma_word "none")
endif()
message(STATUS "nixl UCX: ${NIXL_UCX_VERSION} from ${NIXL_UCX_LIBDIR}, CUDA transports: "
               "${_nixl_cuda_word}, RDMA modules: ${_nixl_rdma_word} (${NIXL_UCX_MODULE_DIR})")
if(NIXL_UCX_VERSION VERSION_LESS 1.19 AND NOT NIXL_UCX_ROOT)
  message(STATUS "nixl UCX: ${NIXL_UCX_VERSION} is old (put on ordinary memory is emulated, no "
                 "CUDA); scripts/build-ucx.sh builds 1.22 into ${NIXL_UCX_DEFAULT_ROOT}, which "
                 "CMake then finds by default (docs/ucx.md)")
endif()

# Installed binaries and modules keep the path of a UCX outside the system's library folders.
if(NOT DEFINED CMAKE_INSTALL_RPATH_USE_LINK_PATH)
  set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
endif()
