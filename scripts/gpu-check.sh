#!/usr/bin/env bash
# Builds the GPU tests and benchmarks and runs them on a GPU machine, in one command:
#   scripts/gpu-check.sh
# - tests: the CUDA backend (nixl_cuda_tests) and the UCX backend with its VRAM cases
#   (nixl_ucx_tests: registration, GPU 0 <-> GPU 1 in one process and across two, VRAM <-> DRAM,
#   notifications, 1 and 1000 descriptors);
# - benchmarks: nixl_cuda_bench, nixl_cuda_ipc_probe, and nixl-bench's VRAM runs
#   (bench/nixl-bench/gpu-runs.sh) when nixl-bench was built or NIXL_BENCH names one.
# UCX: CMake takes /opt/nixl/ucx-1.22.0 (scripts/build-ucx.sh, with CUDA) first; NIXL_UCX_PREFIX
# names another prefix (a carried one). Without any UCX the UCX tests are left out.
#   QUICK=1      shorter benchmarks        SKIP_BENCH=1  tests only   SKIP_TESTS=1  benchmarks only
#   SANITIZE=1   also compute-sanitizer memcheck over the batch kernel
# Logs go to $OUT when set (else $BUILD/out): gpu-info.txt, build.log, tests.log,
# ucx-vram-tests.log, ucx-tests.log, bench.txt, probe.txt, nixl-bench/.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib.sh"
nixl_gpu_check_start /tmp/nixl-gpu-build

{ nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$OUT/gpu-info.txt" 2>&1

configure_full() {  # $1: UCX ON/OFF, $2: metadata ON/OFF
  cmake -S "$ROOT" -B "$BUILD/full" $GEN -DCMAKE_BUILD_TYPE=Release \
    -DNIXL_WITH_CUDA=ON -DNIXL_WITH_UCX="$1" -DNIXL_WITH_POSIX=OFF -DNIXL_WITH_METADATA="$2" \
    -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_PYTHON=OFF -DNIXL_BUILD_TESTS=ON -DNIXL_BUILD_BENCH=ON \
    -DNIXL_CUDA_ARCHITECTURES="$ARCH" ${EXTRA_CMAKE_ARGS:-}
}

configure_alone() {  # the CUDA backend, its tests and benchmark
  nixl_configure_alone nixl_cuda_check backends/cuda:cuda tests/backends/cuda:cuda-tests \
    bench/cuda:cuda-bench -- -DNIXL_CUDA_ARCHITECTURES="$ARCH"
}

nixl_configure CUDA
targets="nixl_cuda_tests nixl_cuda_peer nixl_cuda_bench nixl_cuda_ipc_probe"
for t in nixl_ucx_tests nixl_ucx_peer nixl-bench; do nixl_has_target $t && targets="$targets $t"; done
nixl_build $targets

find_bin() { nixl_find_bin "$1"; }
TESTS=$(find_bin nixl_cuda_tests)
UCX_TESTS=$(find_bin nixl_ucx_tests)
run_tests() {
  "$TESTS" --durations yes >"$OUT/tests.log" 2>&1 || rc=$?
  grep -E 'SKIPPED|FAILED|passed|failed|^[0-9.]+ s:' "$OUT/tests.log" | tail -40
  echo "CUDA tests exit code: $rc"
  if [ -n "$UCX_TESTS" ]; then
    # the VRAM cases first and on their own, so that a crash elsewhere cannot hide them
    local urc=0 vrc=0
    "$UCX_TESTS" "[vram]" --durations yes >"$OUT/ucx-vram-tests.log" 2>&1 || vrc=$?
    grep -E 'SKIPPED|FAILED|passed|failed|s: ucx vram' "$OUT/ucx-vram-tests.log" | tail -12
    echo "UCX VRAM tests exit code: $vrc"
    "$UCX_TESTS" "~[vram]" --durations yes >"$OUT/ucx-tests.log" 2>&1 || urc=$?
    grep -E 'SKIPPED|FAILED|passed|failed' "$OUT/ucx-tests.log" | tail -12
    echo "UCX tests (the rest) exit code: $urc"
    [ $vrc -ne 0 ] && rc=$vrc
    [ $urc -ne 0 ] && rc=$urc
  else
    echo "UCX tests: not built (no UCX found; set NIXL_UCX_PREFIX)"
  fi
  if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    # memcheck over the batch kernel with every descriptor count (misaligned offsets included)
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$TESTS" "cuda gpu: 1 to 4096 descriptors*" >"$OUT/sanitizer.log" 2>&1
    echo "compute-sanitizer memcheck exit code: $? (log: sanitizer.log)"
    tail -5 "$OUT/sanitizer.log"
  fi
}
rc=0
[ "${SKIP_TESTS:-0}" != 1 ] && run_tests
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  "$(find_bin nixl_cuda_ipc_probe)" 2>&1 | tee "$OUT/probe.txt"
  "$(find_bin nixl_cuda_bench)" ${QUICK:+--quick} >"$OUT/bench.txt" 2>&1
  NB=${NIXL_BENCH:-$(find_bin nixl-bench)}
  if [ -n "$NB" ]; then
    "$ROOT/bench/nixl-bench/gpu-runs.sh" "$NB" "$OUT/nixl-bench" ${GPU_RUNS:-}
  else
    echo "nixl-bench: not built (needs CLI11, nlohmann-json and curl headers); set NIXL_BENCH"
  fi
fi
exit $rc
