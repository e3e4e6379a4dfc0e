#!/usr/bin/env bash
# Builds UCX 1.22.0 into a prefix of its own (default /opt/nixl/ucx-1.22.0), with its CUDA
# transports (cuda_copy, cuda_ipc) when a CUDA toolkit is found. Skips the build when the
# prefix already holds a working 1.22.0 build made with the same CUDA choice.
#   scripts/build-ucx.sh                 # build or reuse
#   NIXL_UCX_PREFIX=/somewhere scripts/build-ucx.sh
# Source, in this order: $NIXL_UCX_TARBALL, the vendored ../shared/vendor/ucx-1.22.0.tar.gz,
# else the upstream release download.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/lib.sh"
version=1.22.0
prefix=${NIXL_UCX_PREFIX:-/opt/nixl/ucx-$version}
cuda=${NIXL_UCX_CUDA:-${CUDA_HOME:-/usr/local/cuda}}
[[ -x $cuda/bin/nvcc ]] || cuda=""
# RDMA transports (ib, ib_mlx5, efa, rdmacm) are built when rdma-core's headers are installed.
rdma=none
[[ -f /usr/include/infiniband/verbs.h && -f /usr/include/rdma/rdma_cma.h ]] && rdma=verbs
want="version=$version cuda=${cuda:-none} rdma=$rdma"

stamp=$prefix/.nixl-build
if [[ -f $stamp && $(cat "$stamp") == "$want" && -x $prefix/bin/ucx_info ]] &&
  "$prefix/bin/ucx_info" -v 2>/dev/null | grep -q "Library version: $version"; then
  echo "UCX $version already built in $prefix ($want)"
  exit 0
fi

work=$(mktemp -d /tmp/nixl-ucx-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
nixl_ucx_source "$here" "$version" "$work"
echo "building UCX $version from $src into $prefix ($want)"
tar -xzf "$src" -C "$work"
srcdir=$work/ucx-$version

# UCX's default release configuration (assertions on, so that misuse aborts loudly in tests),
# thread-safe workers; RDMA providers are built when their headers are present.
cfg=(--prefix="$prefix" --enable-mt --disable-static --without-java --without-go --disable-doxygen-doc)
# RDMA: with rdma-core's headers, ask for the verbs, mlx5, EFA and rdmacm modules outright, so that
# configure fails loudly instead of leaving one out. GDA-KI (GPU-initiated mlx5, needs DOCA
# GPUNetIO headers that no Debian package has) stays off.
if [[ $rdma == verbs ]]; then
  cfg+=(--with-verbs --with-mlx5 --with-efa --with-rdmacm --without-gda)
else
  cfg+=(--without-verbs --without-rdmacm)
fi
env=()
if [[ -n $cuda ]]; then
  # nvml.h: from the toolkit when it has one, else the vendored copy. libnvidia-ml: the driver's
  # when installed, else a link-only stub; the cuda modules then load only where a driver is.
  inc=$work/nvml-include
  lib=$work/nvml-lib
  mkdir -p "$inc" "$lib"
  if [[ -f $cuda/include/nvml.h ]]; then
    cp "$cuda/include/nvml.h" "$inc/"
  else
    for c in "$here/../shared/vendor/nvml/nvml.h" "$here/shared/vendor/nvml/nvml.h"; do
      [[ -f $c ]] && { cp "$c" "$inc/"; break; }
    done
  fi
  [[ -f $inc/nvml.h ]] || { echo "nvml.h not found: set NIXL_UCX_CUDA= to build without CUDA" >&2; exit 1; }
  if ! ldconfig -p | grep -q 'libnvidia-ml.so.1 '; then
    grep -oE '^[a-zA-Z_]+[ *]+DECLDIR +nvml[A-Za-z0-9_]+' "$inc/nvml.h" | awk '{print $NF}' | sort -u |
      { cat; echo nvmlInit; } | sort -u | sed 's/.*/void &(void) {}/' >"$lib/stub.c"
    cc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$lib/libnvidia-ml.so.1" "$lib/stub.c"
    ln -sf libnvidia-ml.so.1 "$lib/libnvidia-ml.so"
  fi
  cfg+=(--with-cuda="$cuda")
  env+=(CPPFLAGS="-I$inc" LDFLAGS="-L$lib -L$cuda/lib64/stubs -Wl,-rpath-link,$lib")
else
  cfg+=(--without-cuda)
fi

# The release tarball lacks the DOCA GPUNetIO headers of GDA-KI (an empty gpunetio/ folder), yet
# UCX's device header includes gdaki.cuh whenever that file and mlx5dv.h exist, which breaks the
# CUDA perf kernel. With GDA-KI off, those two device headers go, as if mlx5 had no GDA.
gda=$srcdir/src/uct/ib/mlx5/gdaki
if [[ $rdma == verbs && -n $cuda && ! -e $gda/gpunetio/device/doca_gpunetio_dev_verbs_qp.cuh ]]; then
  rm -f "$gda/gdaki.cuh" "$gda/d2p.cuh"
fi

mkdir -p "$srcdir/build"
cd "$srcdir/build"
env "${env[@]}" ../configure "${cfg[@]}" >"$work/configure.log" 2>&1 ||
  { tail -40 "$work/configure.log"; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log"; exit 1; }
mkdir -p "$prefix"
make install >"$work/install.log" 2>&1 || { tail -40 "$work/install.log"; exit 1; }
# configure leaves verbs out with a warning only (and mlx5, efa, rdmacm with it) when libibverbs
# itself is unusable: check that the RDMA modules are there before calling the build done.
if [[ $rdma == verbs ]]; then
  for m in libuct_ib libuct_ib_mlx5 libuct_ib_efa libuct_rdmacm; do
    [[ -f $prefix/lib/ucx/$m.so ]] || {
      grep -E 'WARNING|modules:' "$work/configure.log" | tail -20
      echo "build-ucx: $m.so was not built though rdma-core's headers are installed" >&2
      exit 1
    }
  done
fi
echo "$want" >"$stamp"
"$prefix/bin/ucx_info" -v
echo "transports:"; ls "$prefix/lib/ucx"
