#!/usr/bin/env bash
# Builds the Python module with the CUDA and UCX backends and runs the pytest suite on a GPU
# machine: CUDA tensors move through the CUDA backend and, with backends=["UCX"], between two
# processes through UCX (test_torch.py). One command:
#   tests/python/gpu-check.sh
# UCX: CMake takes /opt/nixl/ucx-1.22.0 (scripts/build-ucx.sh, with CUDA) first; NIXL_UCX_PREFIX
# names another prefix. EXTRA_CMAKE_ARGS: more configure arguments. Uses the python3 on PATH (the one with
# torch) and pip's or Debian's pybind11. Without UCX, POSIX or metadata headers it builds with
# fewer backends (the UCX cases then skip with the reason).
# SKIP_PYTEST=1: build only. Logs go to $OUT when set (else $BUILD/out).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/scripts/lib.sh"
BUILD=${BUILD:-/tmp/nixl-py-gpu-build}
OUT=${OUT:-$BUILD/out}
ARCH=${NIXL_CUDA_ARCHITECTURES:-90}
JOBS=${JOBS:-$(nproc)}
PY=${PYTHON:-$(command -v python3)}
mkdir -p "$BUILD" "$OUT"
nixl_gpu_build_env

configure() {  # $1: folder suffix; $2..: ON/OFF for UCX, POSIX, metadata
  cmake -S "$ROOT" -B "$BUILD/b$1" $GEN -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PY" \
    -DNIXL_WITH_CUDA=ON -DNIXL_WITH_UCX="$2" -DNIXL_WITH_POSIX="$3" -DNIXL_WITH_METADATA="$4" \
    -DNIXL_BUILD_PYTHON=ON -DNIXL_BUILD_TESTS=OFF -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_BENCH=OFF \
    -DNIXL_CUDA_ARCHITECTURES="$ARCH" ${EXTRA_CMAKE_ARGS:-}
}
B=""
# Widest first: a GPU machine may lack UCX, curl or nlohmann-json headers.
for set in "all ON ON ON" "ucx-md ON OFF ON" "ucx ON OFF OFF" "posix-md OFF ON ON" \
    "posix OFF ON OFF" "cuda OFF OFF OFF"; do
  set -- $set
  if configure "$@" >>"$OUT/py-build.log" 2>&1 && \
     cmake --build "$BUILD/b$1" -j "$JOBS" --target nixl_python >>"$OUT/py-build.log" 2>&1; then
    B="$BUILD/b$1"
    break
  fi
  echo "build '$1' (UCX=$2 POSIX=$3 metadata=$4) failed" | tee -a "$OUT/py-build.log"
done
if [ -z "$B" ]; then
  grep -E 'Error|error|not found|FAILED' -A3 "$OUT/py-build.log" | head -60
  exit 1
fi
echo "built in $B: $(PYTHONPATH=$B/python "$PY" -c 'import nixl._bindings as b; print(b._BUILT_BACKENDS)')"
[ "${SKIP_PYTEST:-0}" = 1 ] && exit 0
PYTHONPATH="$B/python" "$PY" -m pytest -v -p no:cacheprovider -rs "$ROOT/tests/python" 2>&1 \
  | tee "$OUT/py-tests.log" | grep -E 'PASS|FAIL|SKIP|ERROR|passed|failed'
exit "${PIPESTATUS[0]}"
