#!/usr/bin/env bash
# The device API's checks on a GPU machine, in one command:
#   scripts/device-check.sh
# Builds nixl_device_tests (tests/device: memory views through nixl.h's prepMemView and NIXL's
# nixl_device.cuh, and nixl-cpp's nixl/device.cuh, with the CUDA and the UCX backends: NIXL's
# device test's layout on GPU 0, atomics as completion counters, bad indices and released views)
# and runs it, then nixl_device_bench (bench/device: puts through views against a copy kernel,
# cudaMemcpyAsync and the CUDA backend's batched copy; output in $OUT/device-bench.txt) and
# nixl-bench --use_device_api (output in $OUT/nixl-bench-device.txt). Missed speed goals do not
# fail the script; a bench that fails (wrong data, an error, a crash) does.
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
# nixl-bench --use_device_api: the sweep's blocks put by a kernel through views (THREAD and WARP
# level, UCX and CUDA, one process and two on GPU 0), each point's data checked, next to a copy
# kernel of the same shape; output in $OUT/nixl-bench-device.txt. nixl-bench needs the metadata
# exchange (libcurl, OpenSSL), CLI11 and nlohmann_json: without them it is left out.
# NIXL_BENCH names a nixl-bench to run instead of building one (e.g. a folder of
# bench/nixl-bench/pack.sh: NIXL_BENCH=that/nixl-bench.sh).
nrc=0
nixl_bench=${NIXL_BENCH:-$BUILD/b/bench/nixl-bench/nixl-bench}
if [[ -n ${NIXL_BENCH:-} ]] ||
  { cmake -S "$ROOT" -B "$BUILD/b" -DNIXL_WITH_METADATA=ON >"$OUT/configure-nixl-bench.log" 2>&1 &&
    cmake --build "$BUILD/b" --target nixl-bench -j"$JOBS" >"$OUT/build-nixl-bench.log" 2>&1; }; then
  nb=(--use_device_api --initiator_seg_type VRAM --target_seg_type VRAM --check_consistency
      --start_block_size 4K --max_block_size 16M --start_batch_size 1 --max_batch_size 16
      --num_iter 200 --warmup_iter 20 --large_blk_iter_ftr 4)
  {
    for run in "UCX 1 32" "UCX 1 256" "UCX 2 256" "CUDA 1 256" "CUDA 2 256"; do
      read -r be procs threads <<<"$run"
      echo "\$ nixl-bench --backend $be --processes $procs --num_threads $threads ${nb[*]}"
      "$nixl_bench" --backend "$be" --processes "$procs" \
        --num_threads "$threads" "${nb[@]}" || { r=$?; echo "exit code: $r"; nrc=$r; }
    done
  } >"$OUT/nixl-bench-device.txt" 2>&1
  cat "$OUT/nixl-bench-device.txt"
else
  grep -E 'Error|error|FAILED' "$OUT/configure-nixl-bench.log" "$OUT/build-nixl-bench.log" 2>/dev/null | head -20
  echo "nixl-bench: not built (logs: $OUT/configure-nixl-bench.log, $OUT/build-nixl-bench.log)"
fi
echo "nixl-bench device API exit code: $nrc"
[ $rc -ne 0 ] && exit $rc
[ $brc -ne 0 ] && exit $brc
exit $nrc
