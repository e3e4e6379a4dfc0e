#!/usr/bin/env bash
# Every path of docs/performance.md's "At a glance" table, each with its anchor in the same run,
# ROUNDS times in a row, then one table of ratios, their spread over the rounds and the goal:
#
#   bench/nixl-bench/compare.sh OUTDIR [ROUNDS]          (default 3 rounds; root: sandbox hosts)
#   bench/nixl-bench/compare.sh --gpu OUTDIR [ROUNDS]    (a GPU machine: GDS, DRAM <-> VRAM)
#
# Rows on any machine (two processes, UCX defaults, WRITE, data checked where nixl-bench can):
#   4k      4 KiB, 20,000 requests: nixl-bench's Avg Lat. against NIXL 1.4's nixlbench
#           (../shared/peers/nixl-1.4, its fastest setting: error mode none, no progress thread)
#   64m     64 MiB: nixl-bench against memcpy (same run), NIXL beside it, and the transport's own
#           floor: process_vm_writev of the same 64 MiB in 512 KiB segments (UCX's cma pattern)
#           between two processes, and a shared-memory ring (nixl-copy-paths); nixl-bench with
#           both processes polling (no progress threads), and with cma calls at every size
#           (shm_min_size=0)
#   bulk    65,536 and 131,072 x 16 KiB in one request: contiguous (merged) and scattered
#           (one put per block), against NIXL (one put per block) and memcpy
#   python  Python nixl_agent defaults, 64 MiB, against numpy's copyto (bench/python/two_process.py)
#   hosts   two sandbox hosts (tests/multihost/sandbox.sh, TCP over veth), 64 KiB .. 16 MiB,
#           against ucx_perftest ucp_put_bw (one put in flight) and NIXL (multihost.sh)
# Rows with --gpu (built first by scripts/gds-check.sh in $BUILD, default /tmp/nixl-gds-build):
#   gds     GDS and GDS_MT, VRAM <-> file, WRITE and READ, 64 KiB .. 64 MiB, against direct
#           cuFile in the same run (scripts/gds-check.sh's benchmark part)
#   hostdev UCX DRAM <-> VRAM, one and two processes, 1 .. 256 MiB, 100 iterations a point after
#           200 ms of untimed requests, against cudaMemcpyAsync (scripts/gpu-ucx-hostdev.sh)
#
# Environment: NIXL_BENCH, NIXLBENCH_DIR (NIXL's packed nixlbench), NIXL_UCX (the UCX NIXL runs
# over: default the one nixl-bench loads, through nixl-on-ucx.sh; "packed": NIXL's own
# 1.13.1; or a prefix), NIXL_PYTHONPATH (the Python
# module's build folder, default build/ci/python), COPY_PATHS (nixl-copy-paths), ROWS (a comma
# list of the rows above, default all of the machine's), FIRST_ROUND (default 1: rounds from
# FIRST_ROUND to ROUNDS run; the table covers every round in OUTDIR). OUTDIR/<round>/ keeps every log;
# OUTDIR/table.md is the table (compare_table.py OUTDIR prints it again).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
gpu=""
[[ ${1:-} == --gpu ]] && { gpu=1; shift; }
out=${1:?usage: compare.sh [--gpu] OUTDIR [ROUNDS]}
rounds=${2:-3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -n $gpu ]]; then
  rows=${ROWS:-gds,hostdev}
  # one build for both rows: scripts/gds-check.sh's (CUDA, GDS, UCX where found, nixl-bench)
  build=${BUILD:-/tmp/nixl-gds-build}
  find_bench() { find "$build" -name nixl-bench -type f -perm -u+x 2>/dev/null | head -1; }
  if [[ -z ${NIXL_BENCH:-} && -z $(find_bench) ]]; then
    echo "building in $build (scripts/gds-check.sh, tests and benchmarks left out)"
    OUT=$out/build BUILD=$build SKIP_TESTS=1 SKIP_BENCH=1 bash "$root/scripts/gds-check.sh" \
      >"$out/build.txt" 2>&1 || tail -20 "$out/build.txt"
  fi
  bench=${NIXL_BENCH:-$(find_bench)}
else
  rows=${ROWS:-4k,64m,bulk,python,hosts}
  bench=${NIXL_BENCH:-$root/build/ci/bench/nixl-bench/nixl-bench}
fi
peer=${NIXLBENCH_DIR:-$root/../shared/peers/nixl-1.4}
# NIXL runs over the UCX that nixl-bench loads (nixl-on-ucx.sh), so that both are measured over
# the same transport; NIXL_UCX=packed keeps the packed NIXL's own UCX (Debian's 1.13.1), and
# NIXL_UCX=PREFIX names another UCX.
nixl_ucx=${NIXL_UCX:-$(ldd "$bench" 2>/dev/null | awk '/libucp\.so/ && $3 ~ /^\// {print $3; exit}')}
if [[ -n $nixl_ucx && $nixl_ucx != packed ]]; then
  [[ -f $nixl_ucx ]] && nixl_ucx=$(dirname "$(dirname "$(readlink -f "$nixl_ucx")")")
  "$root/bench/nixl-bench/nixl-on-ucx.sh" "$out/nixl-peer" "$nixl_ucx" "$peer" >"$out/nixl-peer.txt" 2>&1 &&
    peer=$out/nixl-peer
fi
pypath=${NIXL_PYTHONPATH:-$root/build/ci/python}
copy_paths=${COPY_PATHS:-$(dirname "$bench")/nixl-copy-paths}
want() { [[ ,$rows, == *,$1,* ]]; }
[[ -x $bench ]] || {
  echo "compare.sh: no nixl-bench at '$bench' (set NIXL_BENCH)" >&2
  exit 1
}

# One nixl-bench run: its table and NIXL's (with --compare_nixl) in NAME.txt, its rows in NAME.csv
nb() {
  local name=$1
  shift
  echo "\$ [load $(cut -d' ' -f1-3 /proc/loadavg)] nixl-bench $*" >"$d/$name.txt"
  timeout 600 env UCX_NET_DEVICES=lo "$bench" "$@" --csv "$d/$name.csv" >>"$d/$name.txt" 2>&1
  echo "  $name: rc $?"
}
nixl=(--compare_nixl "$peer" --compare_nixl_runs 1)
bulk=(--start_block_size 16K --max_block_size 16K --num_iter 10 --warmup_iter 2)

echo "compare.sh: $(nproc) cores, $(uname -r),$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" |
  tee "$out/machine.txt"
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
[[ -n $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] && rev="$rev with uncommitted changes"
echo "nixl-bench: $bench ($rev)" |
  tee -a "$out/machine.txt"
echo "NIXL: $peer ($(cat "$out/nixl-peer.txt" 2>/dev/null || echo "its packed UCX"))" |
  tee -a "$out/machine.txt"
for ((r = ${FIRST_ROUND:-1}; r <= rounds; r++)); do
  d=$out/$r
  mkdir -p "$d"
  echo "round $r: $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee "$d/load.txt"
  want 4k && nb 4k --start_block_size 4K --max_block_size 4K --num_iter 20000 \
    --warmup_iter 1000 --baseline none "${nixl[@]}"
  if want 64m; then
    nb 64m --start_block_size 64M --max_block_size 64M --num_iter 40 --warmup_iter 4 \
      --large_blk_iter_ftr 1 --check_consistency "${nixl[@]}"
    # the same with both processes polling their workers instead of progress threads (UCX's
    # shared-memory protocol needs the target's worker progressed)
    nb 64m-nopt --start_block_size 64M --max_block_size 64M --num_iter 40 --warmup_iter 4 \
      --large_blk_iter_ftr 1 --check_consistency --enable_pt false
    # the backend's cma calls at every size (shm_min_size=0: the default before 8 MiB blocks
    # went through UCX's shared-memory protocol)
    nb 64m-cma --start_block_size 64M --max_block_size 64M --num_iter 40 --warmup_iter 4 \
      --large_blk_iter_ftr 1 --check_consistency --backend_params shm_min_size=0
    [[ -x $copy_paths ]] && timeout 300 "$copy_paths" >"$d/copy-paths.txt" 2>&1
  fi
  if want bulk; then
    for n in 65536 131072; do
      nb "bulk-$n" "${bulk[@]}" --start_batch_size $n --max_batch_size $n \
        --total_buffer_size $((n * 16384)) "${nixl[@]}"
      nb "bulk-$n-scatter" "${bulk[@]}" --start_batch_size $n --max_batch_size $n \
        --total_buffer_size $((n * 32768)) --scatter
    done
  fi
  if want python; then
    PYTHONPATH=$pypath timeout 300 /usr/bin/python3 "$root/bench/python/two_process.py" \
      --iters 5000 --rounds 5 >"$d/python.txt" 2>&1
    echo "  python: rc $?"
  fi
  if want hosts; then
    OPS=WRITE START=64K MAX=16M ITER=1000 NIXL_BENCH=$bench NIXLBENCH_DIR=$peer \
      timeout 900 "$root/bench/nixl-bench/multihost.sh" "$d/hosts" 1 >"$d/hosts.txt" 2>&1
    echo "  hosts: rc $?"
  fi
  if want gds; then
    OUT=$d/gds SKIP_TESTS=1 QUICK=1 BUILD=$build NIXL_BENCH=$bench timeout 1200 bash "$root/scripts/gds-check.sh" \
      >"$d/gds.txt" 2>&1
    echo "  gds: rc $?"
  fi
  if want hostdev; then
    AFTER_ONLY=1 KEEP=1 ITERS=100 FTR=1 BUILD=$build NIXL_BENCH=$bench timeout 600 \
      bash "$root/scripts/gpu-ucx-hostdev.sh" \
      "$d/hostdev" >"$d/hostdev.txt" 2>&1
    echo "  hostdev: rc $?"
  fi
done
/usr/bin/python3 "$root/bench/nixl-bench/compare_table.py" "$out" | tee "$out/table.md"
