#!/usr/bin/env bash
# Configures, builds and runs the test suite of one CMake preset (default: ci).
#   scripts/test.sh            # everything CI runs on this machine
#   scripts/test.sh asan       # the same suite under ASan+UBSan (tsan, fuzz likewise)
# It first installs what it needs (scripts/install-deps.sh; NIXL_SKIP_DEPS=1 skips that).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ ${NIXL_SKIP_DEPS:-0} == 1 ]] || scripts/install-deps.sh >&2
preset=${1:-ci}
shift || true
jobs=${NIXL_JOBS:-$(nproc)}
# ccache (installed by install-deps.sh) serves every preset and every clone of the tree: paths
# below the clone's root are hashed relative to it. A launcher set by the caller wins.
if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" "$@"
