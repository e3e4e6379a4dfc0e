#!/usr/bin/env bash
# The device API's checks on a GPU machine, in one command:
#   scripts/device-check.sh
# Builds nixl_device_tests (tests/device: memory views through nixl.h's prepMemView and NIXL's
# nixl_device.cuh, and nixl-cpp's nixl/device.cuh, with the CUDA and the UCX backends: NIXL's
# device test's layout on GPU 0, atomics as completion counters, bad indices and released views)
# and runs it, then nixl_device_bench (bench/device: puts through views against a copy kernel,
# cudaMemcpyAsync and the CUDA backend's batched copy; output in $OUT/device-bench.txt). Missed
# speed goals do not fail the script; a bench that fails (wrong data, an error, a crash) does.
# UCX: as scripts/gpu-check.sh (NIXL_UCX_PREFIX names a carried prefix).
#   BUILD (default /tmp/nixl-device-build), OUT (logs; default $BUILD/out), JOBS, NIXL_CUDA_ARCHITECTURES
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib.sh"
nixl_gpu_check_start /tmp/nixl-device-build
{ nvidia-smi -L; nvcc --version | tail -1; } >"$OUT/gpu-info.txt" 2>&1
cmake -S "$ROOT" -B "$BUILD/b" $GEN -DCMAKE_BUILD_TYPE=Release \
  -DNIXL_WITH_CUDA=ON -DNIXL_WITH_UCX=ON -DNIXL_WITH_POSIX=OFF -DNIXL_WITH_METADATA=OFF \
  -DNIXL_WITH_PROMETHEUS=OFF -DNIXL_WITH_GDS=OFF -DNIXL_WITH_OBJ=OFF -DNIXL_WITH_LIBFABRIC=OFF \
  -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_PYTHON=OFF -DNIXL_BUILD_BENCH=ON -DNIXL_BUILD_TESTS=ON \
  -DNIXL_BUILD_COMPAT=ON -DNIXL_CUDA_ARCHITECTURES="$ARCH" ${EXTRA_CMAKE_ARGS:-} \
  >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD/b" --target nixl_device_tests -j"$JOBS" >"$OUT/build.log" 2>&1 ||
  { grep -E 'error|FAILED' "$OUT/build.log" | head -40; exit 1; }
rc=0
"$BUILD/b/tests/device/nixl_device_tests" --durations yes >"$OUT/device-tests.log" 2>&1 || rc=$?
grep -E 'SKIPPED|FAILED|failed|passed|with expansion|REQUIRE|CHECK|receiver|^[0-9.]+ s:' "$OUT/device-tests.log" | tail -80
echo "device tests exit code: $rc"
brc=0
if cmake --build "$BUILD/b" --target nixl_device_bench -j"$JOBS" >"$OUT/build-bench.log" 2>&1; then
  "$BUILD/b/bench/device/nixl_device_bench" >"$OUT/device-bench.txt" 2>&1 || brc=$?
  cat "$OUT/device-bench.txt"
else
  grep -E 'error|FAILED' "$OUT/build-bench.log" | head -40
  brc=1
fi
echo "device bench exit code: $brc"
[ $rc -ne 0 ] && exit $rc
exit $brc
