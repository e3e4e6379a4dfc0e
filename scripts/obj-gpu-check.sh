#!/usr/bin/env bash
# The OBJ / AZURE_BLOB VRAM tests on a GPU machine, in one command, against s3rver and azurite.
#   scripts/obj-gpu-check.sh pack   # here, where scripts/install-deps.sh installed Node and the
#                                   # servers: writes build/carry/obj-node.tar.xz (~35 MiB)
#   scripts/obj-gpu-check.sh        # there, from the source tree, with that file carried:
#                                   # unpacks it when no Node is on PATH, builds and runs
#                                   # nixl_obj_gpu_tests and nixl_obj_fake_cuda_tests
# Logs go to $OUT when set (else $BUILD/out): build.log, gpu-tests.log, fake-cuda-tests.log.
# A case that cannot run prints "SKIPPED:" with the reason; the script fails when any did.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ARCHIVE=$ROOT/build/carry/obj-node.tar.xz
PREFIX=${NIXL_NODE_PREFIX:-/opt/nixl/node}

if [ "${1:-}" = pack ]; then
  node=$(command -v node) || { echo "no node on PATH" >&2; exit 1; }
  [ -d "$PREFIX/node_modules" ] || { echo "no $PREFIX/node_modules" >&2; exit 1; }
  mkdir -p "$(dirname "$ARCHIVE")"
  exe=$(readlink -f "$node")
  top=$(basename "$PREFIX")
  tar -cf - --transform "s,^$(basename "$exe")\$,obj-node/bin/node," -C "$(dirname "$exe")" \
      "$(basename "$exe")" \
      --transform "s,^$top/node_modules,obj-node/node_modules," -C "$(dirname "$PREFIX")" \
      "$top/node_modules" | xz -6 -T"${JOBS:-1}" >"$ARCHIVE" || exit 1
  ls -l "$ARCHIVE"
  exit 0
fi

BUILD=${BUILD:-/tmp/nixl-obj-gpu-build}
OUT=${OUT:-$BUILD/out}
mkdir -p "$BUILD" "$OUT"
if ! command -v node >/dev/null || [ ! -d "$PREFIX/node_modules" ]; then
  if [ -f "$ARCHIVE" ]; then
    tar -xJf "$ARCHIVE" -C "$BUILD" || exit 1
    export PATH=$BUILD/obj-node/bin:$PATH NIXL_NODE_PREFIX=$BUILD/obj-node
  else
    echo "no Node or servers here and no $ARCHIVE: the cases will skip" >&2
  fi
fi
GEN=""
command -v ninja >/dev/null && GEN="-G Ninja"
{
  cmake -S "$ROOT" -B "$BUILD/b" $GEN -DCMAKE_BUILD_TYPE=Release -DNIXL_WITH_UCX=OFF \
    -DNIXL_BUILD_PYTHON=OFF -DNIXL_BUILD_BENCH=OFF -DNIXL_BUILD_EXAMPLES=OFF \
    -DNIXL_WITH_LIBFABRIC=OFF -DNIXL_BUILD_COMPAT=OFF &&
    cmake --build "$BUILD/b" -j"${JOBS:-$(nproc)}" --target nixl_obj_gpu_tests nixl_obj_fake_cuda_tests
} >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
rc=0
cd "$BUILD/b/tests/backends/obj" || exit 1
./nixl_obj_gpu_tests '[gpu]' -d yes >"$OUT/gpu-tests.log" 2>&1 || rc=1
./nixl_obj_fake_cuda_tests '[fakecuda]' -d yes >"$OUT/fake-cuda-tests.log" 2>&1 || rc=1
for f in gpu-tests fake-cuda-tests; do
  echo "== $f"
  grep -E "SKIPPED|^[0-9.]+ s: |obj-gpu timing|test cases|All tests passed" "$OUT/$f.log" |
    tail -40
  if grep -q "SKIPPED" "$OUT/$f.log"; then rc=1; fi
done
exit $rc
