#!/usr/bin/env bash
# The runs behind docs/performance.md "UCX, one host" (run log:
# docs/history/2026-11-30-performance-ucx-same-host.md): nixl-bench before and
# after a change (two binaries), and NIXL's own nixlbench, alternating in one command, each run
# preceded by the machine's load. Works in a folder made by pack.sh (binaries next to lib/ and
# ucx/) or with binaries that run as they are:
#   bench/nixl-bench/perf-runs.sh BEFORE AFTER NIXL_DIR OUT [MICRO] [COPY_PATHS]
#     BEFORE, AFTER: nixl-bench binaries (or the same one twice); NIXL_DIR: NIXL's packed
#     nixlbench (run_pair.sh); OUT: folder for the logs; MICRO: nixl_micro_bench (optional, ''
#     to skip); COPY_PATHS: nixl-copy-paths (optional: the machine's own copy paths, and UCX's
#     two same-host protocols for puts side by side, sections G and H).
# ONLY=G,H runs only those sections (letters as below).
# Set PACKED=DIR to run the binaries through DIR's loader and libraries (pack.sh's layout).
set -u
before=${1:?before binary}
after=${2:?after binary}
nixl=${3:?NIXL nixlbench folder}
out=${4:?output folder}
micro=${5:-}
copy_paths=${6:-}
only=${ONLY:-A,B,C,D,E,F,G,H}
want() { [[ ,$only, == *,$1,* ]]; }
mkdir -p "$out"
run_bin() {
  if [[ -n ${PACKED:-} ]]; then
    UCX_MODULE_DIR=$PACKED/ucx "$PACKED/lib/ld-linux-x86-64.so.2" --library-path "$PACKED/lib" "$@"
  else
    "$@"
  fi
}
say() { echo "\$ [load $(cut -d' ' -f1-3 /proc/loadavg)] $*"; }
nb() {
  local bin=$1
  shift
  say "$(basename "$bin") $*"
  timeout 120 env UCX_NET_DEVICES=lo bash -c 'run_bin "$@"' _ "$bin" "$@" 2>&1 |
    grep -vE '^\s*$|UCX +WARN'
}
export -f run_bin
nixl4k() {
  say "NIXL nixlbench (error mode none, no progress thread) 4K x $1"
  PORT=$((20000 + RANDOM % 20000)) NIXLBENCH_UCX_ERR_MODE=none GRACE=5 timeout 120 \
    "$nixl/run_pair.sh" n4k /tmp/nixl-bench-logs --op_type=WRITE --start_block_size=4096 \
    --max_block_size=4096 --num_iter="$1" --warmup_iter=1000 --total_buffer_size=1048576 \
    2>/dev/null | grep -E '^Block|^4096'
}
echo "host: $(nproc) cores, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
k4=(--start_block_size 4K --max_block_size 4K --num_iter 20000 --warmup_iter 1000 --baseline none)
sweep=(--backend UCX --processes 2 --op_type WRITE --start_block_size 4K --max_block_size 64M
       --num_iter 200 --warmup_iter 20 --check_consistency)
want A && {
  echo "## A. 4 KiB WRITE, 20000 requests: before (default) / after (default) / after, no" \
       "progress threads / NIXL (its fastest), three rounds"
  for r in 1 2 3; do
    nb "$before" "${k4[@]}" | grep -E '^[$]|^ +4096'
    nb "$after" "${k4[@]}" | grep -E '^[$]|^ +4096'
    nb "$after" "${k4[@]}" --enable_pt false | grep -E '^[$]|^ +4096'
    nixl4k 20000
  done
} | tee "$out/a-4k.txt"
want B && {
  echo "## B. quickstart sweep, WRITE: before, then after with NIXL before and after it"
  nb "$before" "${sweep[@]}"
  nb "$after" "${sweep[@]}" --compare_nixl "$nixl" --compare_nixl_runs 2
} | tee "$out/b-sweep.txt"
if [[ -n $micro ]] && want F; then
  {
    echo "## F. agent bookkeeping (no-op backend)"
    say "nixl_micro_bench"
    run_bin "$micro" --benchmark_filter='lifecycle|post_status|status_done|release$' \
      --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      2>&1 | grep -E 'median|Benchmark'
  } | tee "$out/f-micro.txt"
fi
want D && {
  echo "## D. threads posting on one agent (4 KiB and 64 KiB, batch 1): 1 thread; 4 threads with" \
       "a worker each (num_threads=4); 4 threads sharing one worker (num_threads=0)"
  th=(--start_block_size 4K --max_block_size 64K --num_iter 20000 --warmup_iter 500
      --baseline none)
  nb "$after" "${th[@]}" --num_threads 1
  nb "$after" "${th[@]}" --num_threads 4
  nb "$after" "${th[@]}" --num_threads 4 --backend_params num_threads=0
} | tee "$out/d-threads.txt"
want C && {
  echo "## C. READ sweep, after, with NIXL"
  nb "$after" "${sweep[@]/WRITE/READ}" --compare_nixl "$nixl" --compare_nixl_runs 1
  echo "## E. pipeline depth 8, WRITE 4K-1M, after, with NIXL"
  nb "$after" --start_block_size 4K --max_block_size 1M --num_iter 2000 --warmup_iter 100 \
    --pipeline_depth 8 --check_consistency --compare_nixl "$nixl" --compare_nixl_runs 1
} | tee "$out/ce-read-pipeline.txt"
if [[ -n $copy_paths ]] && want G; then
  {
    echo "## G. the machine's copy paths between two processes (no UCX): process_vm_writev's" \
         "CPU floor, a shared-memory ring, memcpy; 64 MiB alternating"
    say "nixl-copy-paths"
    run_bin "$copy_paths"
  } | tee "$out/g-copy-paths.txt"
fi
if want H; then
  # UCX 1.22's two same-host protocols for a put, through the same binary and the defaults
  # (progress thread on): cma (its default: process_vm_writev, the target does nothing) and
  # software emulation over shared-memory active messages (what NIXL's UCX 1.13 does: the
  # target's progress thread copies each 8 KiB fragment out and answers the flush), chosen by
  # UCX's own selector with PREFER_OFFLOAD=n and a low cma bandwidth estimate.
  am=(--backend_params engine_config=PREFER_OFFLOAD=n,CMA_BW=2000MBs)
  {
    echo "## H. same-host put protocols, defaults: cma / shared-memory active messages / target" \
         "memory from backend.allocate() (--ucx_alloc) / NIXL, 4 KiB (20000 requests) then" \
         "8-64 MiB, two rounds"
    for r in 1 2; do
      nb "$after" "${k4[@]}" | grep -E '^[$]|^ +4096'
      nb "$after" "${k4[@]}" "${am[@]}" | grep -E '^[$]|^ +4096'
      nb "$after" "${k4[@]}" --ucx_alloc | grep -E '^[$]|^ +4096'
      nixl4k 20000
    done
    big=(--start_block_size 8M --max_block_size 64M --num_iter 200 --warmup_iter 20
         --check_consistency)
    for r in 1 2; do
      nb "$after" "${big[@]}" | grep -E '^[$]|^ +[0-9]'
      nb "$after" "${big[@]}" "${am[@]}" | grep -E '^[$]|^ +[0-9]'
      nb "$after" "${big[@]}" --ucx_alloc | grep -E '^[$]|^ +[0-9]'
    done
  } | tee "$out/h-protocols.txt"
fi
