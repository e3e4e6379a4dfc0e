#!/usr/bin/env bash
# Builds the CUDA backend's tests and benchmark and runs them on a GPU machine, in one command.
#   scripts/gpu-check.sh            # tests, then the benchmark
#   QUICK=1 scripts/gpu-check.sh    # shorter benchmark
#   SANITIZE=1 scripts/gpu-check.sh # also compute-sanitizer memcheck over the batch kernel
# Logs go to $OUT when set (else $BUILD/out): gpu-info.txt, build.log, tests.log, bench.txt.
# Configures with UCX, POSIX and the metadata service off (a GPU machine may lack their
# headers); if the full project does not configure there, builds the CUDA parts alone.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-/tmp/nixl-gpu-build}
OUT=${OUT:-$BUILD/out}
ARCH=${NIXL_CUDA_ARCHITECTURES:-90}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD" "$OUT"

{ nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$OUT/gpu-info.txt" 2>&1
GEN=""
command -v ninja >/dev/null && GEN="-G Ninja"

configure_full() {
  cmake -S "$ROOT" -B "$BUILD/full" $GEN -DCMAKE_BUILD_TYPE=Release \
    -DNIXL_WITH_CUDA=ON -DNIXL_WITH_UCX=OFF -DNIXL_WITH_POSIX=OFF -DNIXL_WITH_METADATA=OFF \
    -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_PYTHON=OFF -DNIXL_BUILD_TESTS=ON -DNIXL_BUILD_BENCH=ON \
    -DNIXL_CUDA_ARCHITECTURES="$ARCH"
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
if configure_full >"$OUT/build.log" 2>&1; then
  B="$BUILD/full"
elif configure_alone >>"$OUT/build.log" 2>&1; then
  echo "full configure failed; building the CUDA parts alone" | tee -a "$OUT/build.log"
  B="$BUILD/alone"
else
  echo "configure failed, see build.log"; tail -40 "$OUT/build.log"; exit 1
fi
if ! cmake --build "$B" -j "$JOBS" --target nixl_cuda_tests nixl_cuda_peer nixl_cuda_bench \
    >>"$OUT/build.log" 2>&1; then
  echo "build failed, see build.log"; grep -E 'error|FAILED' -A3 "$OUT/build.log" | head -60; exit 1
fi
echo "built in $B"

TESTS=$(find "$B" -name nixl_cuda_tests -type f -perm -u+x | head -1)
BENCH=$(find "$B" -name nixl_cuda_bench -type f -perm -u+x | head -1)
rc=0
"$TESTS" --durations yes >"$OUT/tests.log" 2>&1 || rc=$?
grep -E 'SKIPPED|FAILED|passed|failed|^[0-9.]+ s:' "$OUT/tests.log" | tail -40
echo "tests exit code: $rc"
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  # memcheck over the batch kernel with every descriptor count (misaligned offsets included)
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$TESTS" "cuda gpu: 1 to 4096 descriptors*" >"$OUT/sanitizer.log" 2>&1
  echo "compute-sanitizer memcheck exit code: $? (log: sanitizer.log)"
  tail -5 "$OUT/sanitizer.log"
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  "$BENCH" ${QUICK:+--quick} 2>&1 | tee "$OUT/bench.txt"
fi
exit $rc
