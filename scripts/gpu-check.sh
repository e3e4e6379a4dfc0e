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
BUILD=${BUILD:-/tmp/nixl-gpu-build}
OUT=${OUT:-$BUILD/out}
ARCH=${NIXL_CUDA_ARCHITECTURES:-90}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD" "$OUT"
if [ -n "${NIXL_UCX_PREFIX:-}" ]; then
  EXTRA_CMAKE_ARGS="-DNIXL_UCX_ROOT=$NIXL_UCX_PREFIX ${EXTRA_CMAKE_ARGS:-}"
  export LD_LIBRARY_PATH="$NIXL_UCX_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

{ nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$OUT/gpu-info.txt" 2>&1
GEN=""
command -v ninja >/dev/null && GEN="-G Ninja"

configure_full() {  # $1: UCX ON/OFF, $2: metadata ON/OFF
  cmake -S "$ROOT" -B "$BUILD/full" $GEN -DCMAKE_BUILD_TYPE=Release \
    -DNIXL_WITH_CUDA=ON -DNIXL_WITH_UCX="$1" -DNIXL_WITH_POSIX=OFF -DNIXL_WITH_METADATA="$2" \
    -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_PYTHON=OFF -DNIXL_BUILD_TESTS=ON -DNIXL_BUILD_BENCH=ON \
    -DNIXL_CUDA_ARCHITECTURES="$ARCH" ${EXTRA_CMAKE_ARGS:-}
}

configure_alone() {
  # The core is header-only: a small project around it, the CUDA backend and its tests.
  mkdir -p "$BUILD/alone-src"
  cat >"$BUILD/alone-src/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.24)
project(nixl_cuda_check LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(PROJECT_SOURCE_DIR "$ROOT")
include(GNUInstallDirs)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
add_library(nixl_core INTERFACE)
add_library(nixl::core ALIAS nixl_core)
target_include_directories(nixl_core INTERFACE "$ROOT/include")
target_link_libraries(nixl_core INTERFACE fmt::fmt Threads::Threads)
list(APPEND CMAKE_MODULE_PATH "$ROOT/cmake")
enable_testing()
include(NixlTesting)
add_subdirectory("$ROOT/backends/cuda" cuda)
add_subdirectory("$ROOT/tests/backends/cuda" cuda-tests)
add_subdirectory("$ROOT/bench/cuda" cuda-bench)
CM
  cmake -S "$BUILD/alone-src" -B "$BUILD/alone" $GEN -DCMAKE_BUILD_TYPE=Release \
    -DNIXL_CUDA_ARCHITECTURES="$ARCH"
}

B=""
# Widest first: a GPU machine may lack UCX, curl or nlohmann-json headers.
for set in "ON ON" "ON OFF" "OFF OFF"; do
  if configure_full $set >>"$OUT/build.log" 2>&1; then
    B="$BUILD/full"
    echo "configured: UCX ${set% *}, metadata ${set#* }" | tee -a "$OUT/build.log"
    break
  fi
done
if [ -z "$B" ]; then
  if configure_alone >>"$OUT/build.log" 2>&1; then
    echo "full configure failed; building the CUDA parts alone" | tee -a "$OUT/build.log"
    B="$BUILD/alone"
  else
    echo "configure failed, see build.log"; tail -40 "$OUT/build.log"; exit 1
  fi
fi
targets="nixl_cuda_tests nixl_cuda_peer nixl_cuda_bench nixl_cuda_ipc_probe"
all_targets=$(cmake --build "$B" --target help 2>/dev/null)
for t in nixl_ucx_tests nixl_ucx_peer nixl-bench; do
  grep -q "^$t:\|[ /]$t[: ]" <<<"$all_targets" && targets="$targets $t"
done
if ! cmake --build "$B" -j "$JOBS" --target $targets >>"$OUT/build.log" 2>&1; then
  echo "build failed, see build.log"; grep -E 'error|FAILED' -A3 "$OUT/build.log" | head -60; exit 1
fi
echo "built in $B: $targets"

find_bin() { find "$B" -name "$1" -type f -perm -u+x | head -1; }
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
