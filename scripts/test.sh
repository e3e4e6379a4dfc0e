#!/usr/bin/env bash
# Configures, builds and runs the test suite of one CMake preset (default: ci).
#   scripts/test.sh            # everything CI runs on this machine
#   scripts/test.sh asan       # the same suite under ASan+UBSan (tsan, fuzz likewise)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-ci}
shift || true
jobs=${NIXL_JOBS:-$(nproc)}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" "$@"
