#!/usr/bin/env bash
# Makes a copy of NIXL's packed nixlbench (../shared/peers/nixl-1.4, built against Debian's UCX
# 1.13.1) that loads another UCX instead: libucp, libucs, libuct and libucm and UCX's transport
# modules come from PREFIX (default /opt/nixl/ucx-1.22.0, the UCX nixl-cpp is built and tested
# against), so that NIXL and nixl-bench are measured over the same UCX. UCX keeps libucp.so.0's
# ABI across these releases; the CUDA modules are left out (the packed NIXL has no CUDA).
#   bench/nixl-bench/nixl-on-ucx.sh DEST [PREFIX] [NIXL_DIR]
#   DEST/run_pair.sh ... / NIXLBENCH_DIR=DEST bench/nixl-bench/compare.sh ...
set -euo pipefail
dest=${1:?usage: nixl-on-ucx.sh DEST [UCX_PREFIX] [NIXL_DIR]}
prefix=${2:-/opt/nixl/ucx-1.22.0}
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${3:-$root/../shared/peers/nixl-1.4}
[[ -x $src/nixlbench ]] || { echo "nixl-on-ucx.sh: no nixlbench in $src" >&2; exit 1; }
[[ -f $prefix/lib/libucp.so.0 ]] || { echo "nixl-on-ucx.sh: no UCX in $prefix" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
cp -a "$src/." "$dest/"
for l in libucp libucs libuct libucm; do cp -L "$prefix/lib/$l.so.0" "$dest/lib/$l.so.0"; done
rm -f "$dest"/ucx/*
for m in "$prefix"/lib/ucx/libuct_*.so.0; do
  case $(basename "$m") in *cuda* | *gdr* | *rocm* | *ze*) continue ;; esac
  cp -L "$m" "$dest/ucx/"
done
version=$("$prefix/bin/ucx_info" -v 2>/dev/null | sed -n 's/.*Library version: //p' | head -1)
echo "NIXL's nixlbench in $dest now loads UCX ${version:-from $prefix}"
