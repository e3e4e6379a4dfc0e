#!/usr/bin/env bash
# The nixl-bench runs behind docs/history/2026-11-29-performance-ucx-dram-nixl-bench.md and
# docs/history/2026-11-29-performance-posix.md, one
# after another, each preceded by the machine's load. Run from a build folder:
#   bench/nixl-bench/doc-runs.sh path/to/nixl-bench [out-dir] [which]
# which: all (default), ucx, modes, file.
set -euo pipefail
bin=${1:?path of nixl-bench}
out=${2:-/tmp/nixl-bench-doc}
which=${3:-all}
mkdir -p "$out"
run() {
  local name=$1
  shift
  {
    echo "\$ uptime: $(uptime)"
    echo "\$ nixl-bench $*"
    "$bin" "$@" --csv "$out/$name.csv"
  } 2>&1 | tee "$out/$name.txt"
}
if [[ $which == all || $which == ucx ]]; then
  # The main job: two processes, WRITE 4 KiB .. 64 MiB, data checked (scripts/quickstart.sh).
  sweep=(--backend UCX --processes 2 --op_type WRITE --start_block_size 4K --max_block_size 64M
         --num_iter 200 --warmup_iter 20 --check_consistency)
  run ucx-sweep "${sweep[@]}" --plot "$out/ucx-sweep.png"
  run ucx-sweep-ucx-alloc "${sweep[@]}" --ucx_alloc --plot "$out/ucx-sweep-ucx-alloc.png"
  # Ordinary memory again, without progress threads: the target process polls its worker.
  run ucx-sweep-no-pt "${sweep[@]}" --enable_pt false
fi
if [[ $which == all || $which == modes ]]; then
  # The four modes, 16 descriptors per request, two processes, UCX-allocated memory.
  modes=(--backend UCX --processes 2 --ucx_alloc --op_type WRITE --start_block_size 4K
         --max_block_size 256K --start_batch_size 16 --max_batch_size 16 --num_iter 200
         --warmup_iter 20 --check_consistency)
  run ucx-repost "${modes[@]}" --xfer_mode repost
  run ucx-recreate "${modes[@]}" --xfer_mode recreate
  run ucx-prepared "${modes[@]}" --xfer_mode prepared
  run ucx-scatter "${modes[@]}" --xfer_mode repost --scatter
fi
if [[ $which == all || $which == file ]]; then
  # DRAM -> file through POSIX (io_uring), page cache, fio (io_uring, same file) as baseline.
  file=(--backend POSIX --target_seg_type FILE --op_type WRITE --start_block_size 4K
        --max_block_size 256K --start_batch_size 16 --max_batch_size 16 --num_iter 200
        --warmup_iter 20 --check_consistency --filepath /tmp)
  run file-repost "${file[@]}" --xfer_mode repost
  run file-recreate "${file[@]}" --xfer_mode recreate
  run file-prepared "${file[@]}" --xfer_mode prepared
  run file-scatter "${file[@]}" --xfer_mode repost --scatter
fi
