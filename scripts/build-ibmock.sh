#!/usr/bin/env bash
# Builds UCX 1.22.0's contrib/ibmock into a prefix of its own (default /opt/nixl/ibmock/lib):
# a libibverbs.so.1 and libefa.so.1 that fake two EFA devices inside one process, with UD and SRD
# queue pairs (RDMA read/write by memcpy). With that folder first on LD_LIBRARY_PATH, UCX's
# verbs transports (ud_verbs, srd) run on a machine without RDMA; the UCX backend's ibmock tests
# use it (docs/ucx.md). Skips the build when the prefix already holds it.
#   scripts/build-ibmock.sh
#   NIXL_IBMOCK_PREFIX=/somewhere scripts/build-ibmock.sh
# Source, in this order: $NIXL_UCX_TARBALL, the vendored ../shared/vendor/ucx-1.22.0.tar.gz,
# else the upstream release download. Needs rdma-core's headers (libibverbs-dev).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/lib.sh"
version=1.22.0
prefix=${NIXL_IBMOCK_PREFIX:-/opt/nixl/ibmock}
want="ibmock ucx=$version device_index=-1"

stamp=$prefix/.nixl-build
if [[ -f $stamp && $(cat "$stamp") == "$want" && -f $prefix/lib/libibverbs.so.1 &&
  -f $prefix/lib/libefa.so.1 ]]; then
  echo "ibmock of UCX $version already built in $prefix"
  exit 0
fi
for h in infiniband/verbs.h infiniband/efadv.h; do
  [[ -f /usr/include/$h ]] || {
    echo "build-ibmock: /usr/include/$h missing (install libibverbs-dev)" >&2
    exit 1
  }
done

work=$(mktemp -d /tmp/nixl-ibmock-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
nixl_ucx_source "$here" "$version" "$work"
echo "building ibmock of UCX $version from $src into $prefix"
tar -xzf "$src" -C "$work" "ucx-$version/contrib/ibmock"
cd "$work/ucx-$version/contrib/ibmock"
# Its devices are no kernel's: ibv_get_device_index() says so (-1), as for a device without an
# index, so that UCX does not ask the kernel's RDMA netlink about them (where the kernel has no
# RDMA, UCX logs an error for each device when the netlink socket fails).
sed -i '/^int ibv_get_device_index(/,/^}/s/return fake->id;/(void)fake;\n    return -1;/' verbs.c
grep -q 'return -1;' <(sed -n '/^int ibv_get_device_index(/,/^}/p' verbs.c) ||
  { echo "build-ibmock: ibv_get_device_index() of verbs.c is not as expected" >&2; exit 1; }
# The sources and flags of its Makefile (no -O: at -O2 gcc finds a use-after-free in an error
# path of ibv_dereg_mr and -Werror stops), linked with the sonames of the libraries UCX's modules
# load (libibverbs.so.1, libefa.so.1) instead of the Makefile's build path.
mkdir -p "$prefix/lib"
cc=${CC:-cc}
flags=(-ggdb3 -fPIC -Wall -Wextra -Werror -shared)
{
  "$cc" "${flags[@]}" -Wl,-soname,libibverbs.so.1 -o "$prefix/lib/libibverbs.so.1" \
    verbs.c config.c stubs.c -lpthread &&
    "$cc" "${flags[@]}" -Wl,-soname,libefa.so.1 -o "$prefix/lib/libefa.so.1" efa.c config.c
} >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
echo "$want" >"$stamp"
ls "$prefix/lib"
