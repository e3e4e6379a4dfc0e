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
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" "$@"
