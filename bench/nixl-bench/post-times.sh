#!/usr/bin/env bash
# How long post() takes on each path (docs/performance.md, "How long post() takes"): nixl-bench
# runs whose Avg Post and P99 Post columns are the figure (prep, status and release not counted),
# one after another, then post_table.py's table (goal: every p99 under 20 us).
#
#   bench/nixl-bench/post-times.sh OUTDIR            # UCX, POSIX, LIBFABRIC, OBJ, AZURE_BLOB
#   bench/nixl-bench/post-times.sh --gpu OUTDIR      # a GPU machine: CUDA, UCX DRAM <-> VRAM
# (GDS: compare.sh --gpu leaves its CSVs, which post_table.py reads as well. OBJ and AZURE_BLOB
# run against an s3rver and an azurite that nixl-bench starts; a store that is not installed
# leaves its rows out.) Beside POSIX READ, nixl-uring-submit (next to nixl-bench) times
# io_uring_submit itself in the engine's pattern: posix-read-anchor.txt, the kernel's share.
#
# Environment: NIXL_BENCH (nixl-bench; default build/ci/... or, with --gpu, the one of $BUILD),
# ITER (iterations per point, default 200; OBJ_ITER for the object stores, default 100),
# FILE_DIR (POSIX files, default /tmp).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
gpu=""
[[ ${1:-} == --gpu ]] && { gpu=1; shift; }
out=${1:?usage: post-times.sh [--gpu] OUTDIR}
mkdir -p "$out"
if [[ -n $gpu ]]; then
  bench=${NIXL_BENCH:-$(find "${BUILD:-/tmp/nixl-gds-build}" -name nixl-bench -type f -perm -u+x 2>/dev/null | head -1)}
else
  bench=${NIXL_BENCH:-$root/build/ci/bench/nixl-bench/nixl-bench}
fi
[[ -x $bench ]] || {
  echo "post-times.sh: no nixl-bench at '$bench' (set NIXL_BENCH)" >&2
  exit 1
}
iter=${ITER:-200}
sweep=(--start_block_size 4K --max_block_size 64M --num_iter "$iter" --warmup_iter 10
       --large_blk_iter_ftr 4 --baseline none)
run() {
  local name=$1
  shift
  echo "\$ [load $(cut -d' ' -f1-3 /proc/loadavg)] ${ENVV:-}nixl-bench $*" >"$out/$name.txt"
  timeout 600 env ${ENVV:-} "$bench" "$@" --csv "$out/$name.csv" >>"$out/$name.txt" 2>&1
  echo "  $name: rc $?"
}
echo "post-times.sh: $(nproc) cores, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -z $gpu ]]; then
  ENVV="UCX_NET_DEVICES=lo" run ucx-dram --backend UCX "${sweep[@]}"
  ENVV="UCX_NET_DEVICES=lo" run ucx-dram-64 --backend UCX "${sweep[@]}" --max_block_size 64K \
    --start_batch_size 64 --max_batch_size 64 --scatter
  ENVV="UCX_TLS=tcp UCX_NET_DEVICES=lo" run ucx-tcp --backend UCX "${sweep[@]}"
  run posix --backend POSIX --target_seg_type FILE --filepath "${FILE_DIR:-/tmp}" "${sweep[@]}"
  run posix-read --backend POSIX --target_seg_type FILE --filepath "${FILE_DIR:-/tmp}" \
    --op_type READ "${sweep[@]}"
  anchor=$(dirname "$bench")/nixl-uring-submit
  if [[ -x $anchor ]]; then
    timeout 600 "$anchor" --dir "${FILE_DIR:-/tmp}" --start 4K --max 64M --iter "$iter" \
      --warmup 10 --large_ftr 4 >"$out/posix-read-anchor.txt" 2>&1
    echo "  posix-read-anchor: rc $?"
  fi
  run libfabric --backend LIBFABRIC "${sweep[@]}"
  # Object stores: one object per request, up to 16 MiB (a local server's disk is the bound).
  objs=(--start_block_size 4K --max_block_size 16M --num_iter "${OBJ_ITER:-100}" --warmup_iter 5
        --large_blk_iter_ftr 4 --baseline none)
  for be in OBJ AZURE_BLOB; do
    for op in WRITE READ; do
      run "${be,,}-${op,,}" --backend "$be" --op_type "$op" "${objs[@]}"
    done
  done
else
  gpu1=(--initiator_seg_type VRAM --target_seg_type VRAM)
  run cuda --backend CUDA "${gpu1[@]}" --processes 1 "${sweep[@]}"
  run cuda-64 --backend CUDA "${gpu1[@]}" --processes 1 "${sweep[@]}" --max_block_size 64K \
    --start_batch_size 64 --max_batch_size 64 --scatter
  for c in "DRAM VRAM" "VRAM DRAM"; do
    read -r i t <<<"$c"
    for p in 1 2; do
      run "ucx-$i-$t-p$p" --backend UCX --initiator_seg_type "$i" --target_seg_type "$t" \
        --processes "$p" "${sweep[@]}"
    done
  done
fi
/usr/bin/python3 "$root/bench/nixl-bench/post_table.py" "$out" | tee "$out/table.md"
