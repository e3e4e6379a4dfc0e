#!/usr/bin/env bash
# Quick start: builds nixl-bench (UCX + metadata exchange only) and runs a two-process DRAM
# WRITE sweep over loopback: a target process and an initiator process exchange metadata
# through the target's listener, WRITE 4 KiB .. 64 MiB blocks, verify the data of every point
# and print the table, next to single-thread memcpy measured in the same run.
#
#   scripts/quickstart.sh                       # the sweep
#   scripts/quickstart.sh --op_type READ        # any nixl-bench option is passed through
#   NIXL_BUILD_DIR=/tmp/b JOBS=4 scripts/quickstart.sh
# It first installs what it needs (scripts/install-deps.sh; NIXL_SKIP_DEPS=1 skips that).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ ${NIXL_SKIP_DEPS:-0} == 1 ]] || "$root/scripts/install-deps.sh" >&2
build=${NIXL_BUILD_DIR:-$root/build/quickstart}
jobs=${JOBS:-2}
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
mkdir -p "$(dirname "$build")"
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DNIXL_BUILD_TESTS=OFF -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_BENCH=ON \
    -DNIXL_WITH_CUDA=OFF -DNIXL_BUILD_PYTHON=OFF > "$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; exit 1; }
fi
echo "building nixl-bench in $build (-j$jobs) ..." >&2
nice cmake --build "$build" --target nixl-bench -j "$jobs" > "$build.build.log" 2>&1 ||
  { tail -50 "$build.build.log" >&2; exit 1; }
exec "$build/bench/nixl-bench/nixl-bench" --backend UCX --processes 2 --op_type WRITE \
  --start_block_size 4K --max_block_size 64M --num_iter 200 --warmup_iter 20 \
  --check_consistency "$@"
