# Functions the scripts share; sourced (`source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`), not run.
# Each function says which variables of its caller it reads and sets.

# ---- test servers (etcd-test-server.sh, obj-test-server.sh) ----------------------------------

# nixl_stop_pid FILE: stops the process whose pid FILE holds (TERM, up to 5 s, then KILL); a
# paused one is continued first, since it cannot act on TERM. Nothing to do without FILE.
nixl_stop_pid() {
  local file=$1 pid
  [[ -f "$file" ]] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
}

# ---- UCX's source (build-ucx.sh, build-ibmock.sh) --------------------------------------------

# nixl_ucx_source ROOT VERSION WORK: sets `src` to UCX's release tarball: $NIXL_UCX_TARBALL, else
# the vendored ../shared/vendor/ucx-VERSION.tar.gz (beside ROOT or inside it), else the upstream
# release downloaded into the folder WORK.
nixl_ucx_source() {
  local root=$1 version=$2 work=$3 c
  src=${NIXL_UCX_TARBALL:-}
  if [[ -z $src ]]; then
    for c in "$root/../shared/vendor/ucx-$version.tar.gz" "$root/shared/vendor/ucx-$version.tar.gz"; do
      [[ -f $c ]] && { src=$c; break; }
    done
  fi
  if [[ -z $src ]]; then
    src=$work/ucx-$version.tar.gz
    echo "downloading UCX $version"
    curl -fsSL -o "$src" "https://github.com/openucx/ucx/releases/download/v$version/ucx-$version.tar.gz"
  fi
}

# ---- GPU check builds (gpu-check.sh, gds-check.sh, tests/python/gpu-check.sh) ----------------

# nixl_gpu_build_env: a prefix in NIXL_UCX_PREFIX becomes -DNIXL_UCX_ROOT in EXTRA_CMAKE_ARGS and
# goes first on LD_LIBRARY_PATH; sets GEN to "-G Ninja" when ninja is found.
nixl_gpu_build_env() {
  if [ -n "${NIXL_UCX_PREFIX:-}" ]; then
    EXTRA_CMAKE_ARGS="-DNIXL_UCX_ROOT=$NIXL_UCX_PREFIX ${EXTRA_CMAKE_ARGS:-}"
    export LD_LIBRARY_PATH="$NIXL_UCX_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  GEN=""
  if command -v ninja >/dev/null; then GEN="-G Ninja"; fi
}

# nixl_gpu_check_start DEFAULT_BUILD: the start of a GPU check: BUILD (default DEFAULT_BUILD),
# OUT (default $BUILD/out), ARCH ($NIXL_CUDA_ARCHITECTURES, default 90), JOBS (default nproc);
# makes BUILD and OUT, then nixl_gpu_build_env.
nixl_gpu_check_start() {
  BUILD=${BUILD:-$1}
  OUT=${OUT:-$BUILD/out}
  ARCH=${NIXL_CUDA_ARCHITECTURES:-90}
  JOBS=${JOBS:-$(nproc)}
  mkdir -p "$BUILD" "$OUT"
  nixl_gpu_build_env
}

# nixl_configure_alone NAME SOURCE:BINARY... [-- CMAKE_ARGS...]: the core is header-only, so a
# small project NAME around it with the folders given (ROOT-relative source, binary name),
# configured in $BUILD/alone. Reads ROOT, BUILD, GEN.
nixl_configure_alone() {
  local name=$1 d
  shift
  local dirs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do dirs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  mkdir -p "$BUILD/alone-src"
  {
    cat <<CM
cmake_minimum_required(VERSION 3.24)
project($name LANGUAGES CXX)
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
CM
    for d in "${dirs[@]}"; do echo "add_subdirectory(\"$ROOT/${d%%:*}\" ${d#*:})"; done
  } >"$BUILD/alone-src/CMakeLists.txt"
  cmake -S "$BUILD/alone-src" -B "$BUILD/alone" $GEN -DCMAKE_BUILD_TYPE=Release "$@"
}

# nixl_configure PARTS: configures with the caller's `configure_full UCX METADATA` (ON/OFF each),
# widest first since a GPU machine may lack UCX, curl or nlohmann-json headers, else with the
# caller's `configure_alone` (PARTS names what that builds); sets B to the build folder, or exits
# 1. Logs to $OUT/build.log. Reads BUILD, OUT.
nixl_configure() {
  local parts=$1 set
  B=""
  for set in "ON ON" "ON OFF" "OFF OFF"; do
    if configure_full $set >>"$OUT/build.log" 2>&1; then
      B="$BUILD/full"
      echo "configured: UCX ${set% *}, metadata ${set#* }" | tee -a "$OUT/build.log"
      return 0
    fi
  done
  if configure_alone >>"$OUT/build.log" 2>&1; then
    echo "full configure failed; building the $parts parts alone" | tee -a "$OUT/build.log"
    B="$BUILD/alone"
  else
    echo "configure failed, see $OUT/build.log"; tail -40 "$OUT/build.log"; exit 1
  fi
}

# nixl_has_target NAME: whether the build in $B has a target NAME (reads and fills all_targets).
nixl_has_target() {
  [ -n "${all_targets:-}" ] || all_targets=$(cmake --build "$B" --target help 2>/dev/null)
  grep -q "^$1:\|[ /]$1[: ]" <<<"$all_targets"
}

# nixl_build TARGETS...: builds them in $B with $JOBS jobs (log: $OUT/build.log), or exits 1.
nixl_build() {
  if ! cmake --build "$B" -j "$JOBS" --target "$@" >>"$OUT/build.log" 2>&1; then
    echo "build failed, see $OUT/build.log"; grep -E 'error|FAILED' -A3 "$OUT/build.log" | head -60; exit 1
  fi
  echo "built in $B: $*"
}

# nixl_find_bin NAME: the path of the executable NAME under $B (empty when not built).
nixl_find_bin() { find "$B" -name "$1" -type f -perm -u+x | head -1; }
