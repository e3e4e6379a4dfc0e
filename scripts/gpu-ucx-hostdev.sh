#!/usr/bin/env bash
# DRAM <-> VRAM through the UCX backend against cudaMemcpyAsync, on a GPU machine, in one run
# (docs/ucx.md, "GPU memory"):
#   bash scripts/gpu-ucx-hostdev.sh OUTDIR
# after scripts/gpu-check.sh built nixl-bench (it looks in $BUILD, default /tmp/nixl-gpu-build,
# then in build/; NIXL_BENCH names another binary). For each of
#   - initiator DRAM, target VRAM: WRITE (DRAM -> VRAM) and READ (VRAM -> DRAM)
#   - initiator VRAM, target DRAM: WRITE (VRAM -> DRAM) and READ (DRAM -> VRAM)
#   - one process (--processes 1) and two (--processes 2)
#   - before: host_vram_copy=ucx (UCX's protocols, as before) and after: the default (cuda)
# one nixl-bench run from 1 MiB to 256 MiB with the data checked and the cuda baseline
# (cudaMemcpyAsync between pinned host memory and the GPU, same process, same run). Then one
# 4 MiB transfer per direction and process count with UCX_PROTO_INFO=y (host_vram_copy=ucx) into
# proto-info.txt, and a table of GB/s and ratio to the baseline (table.txt). OUTDIR ends with
# four files: info.txt, table.txt, proto-info.txt and runs.tar.gz (each run's log and CSV;
# KEEP=1 also keeps them unpacked in OUTDIR/runs).
#   GPU=N        GPU of the VRAM side (default 0)    ITERS=N  iterations per point (default 20)
#   FTR=N        iterations divided by N above 1 MiB (default 4)
#   WARMUP_MS=M  each run first posts its 1 MiB request untimed for M ms (default 200): a
#                process's first tens of ms of requests run slower (docs/performance.md)
#   DEADLINE=S   skip what is left after S seconds (default 270)
#   AFTER_ONLY=1 only the default (host_vram_copy=cuda), no UCX_PROTO_INFO runs
#                (bench/nixl-bench/compare.sh --gpu)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: scripts/gpu-ucx-hostdev.sh OUTDIR}
BUILD=${BUILD:-/tmp/nixl-gpu-build}
GPU=${GPU:-0}
ITERS=${ITERS:-20}
FTR=${FTR:-4}
WARMUP_MS=${WARMUP_MS:-200}
DEADLINE=${DEADLINE:-270}
RUNS=$OUT/runs
mkdir -p "$RUNS"
if [ -n "${NIXL_UCX_PREFIX:-}" ]; then
  export LD_LIBRARY_PATH="$NIXL_UCX_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
NB=${NIXL_BENCH:-}
if [ -z "$NB" ]; then
  for d in "$BUILD/full" "$BUILD" "$ROOT/build"; do
    [ -d "$d" ] || continue
    NB=$(find "$d" -name nixl-bench -type f -perm -u+x 2>/dev/null | head -1)
    [ -n "$NB" ] && break
  done
fi
if [ -z "$NB" ] || [ ! -x "$NB" ]; then
  echo "nixl-bench not found (run scripts/gpu-check.sh first, or set NIXL_BENCH)"
  exit 1
fi
echo "nixl-bench: $NB" | tee "$OUT/info.txt"
{ uptime; nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current \
    --format=csv 2>&1; } >>"$OUT/info.txt"
start=$(date +%s)

common=(--backend UCX --check_consistency --initiator_gpu "$GPU" --target_gpu "$GPU"
        --start_block_size 1M --max_block_size 256M --num_iter "$ITERS" --warmup_iter 4
        --warmup_ms "$WARMUP_MS" --large_blk_iter_ftr "$FTR")
# name: initiator segment, target segment, op
cases=("h2d-write DRAM VRAM WRITE" "d2h-read DRAM VRAM READ"
       "d2h-write VRAM DRAM WRITE" "h2d-read VRAM DRAM READ")
# tag, backend parameter, environment. frag4M: UCX's staging with 4 MiB host fragments, for the
# pairs that stay with UCX (initiator VRAM, target DRAM of another process).
modes=("before host_vram_copy=ucx -" "after host_vram_copy=cuda -")
[ "${AFTER_ONLY:-0}" = 1 ] && modes=("after host_vram_copy=cuda -")
for procs in 1 2; do
  for c in "${cases[@]}"; do
    read -r name iseg tseg op <<<"$c"
    m2=("${modes[@]}")
    [ "$procs" = 2 ] && [ "$iseg" = VRAM ] && [ "${AFTER_ONLY:-0}" != 1 ] &&
      m2+=("frag4M host_vram_copy=cuda UCX_RNDV_FRAG_SIZE=host:4M,cuda:4M")
    for m in "${m2[@]}"; do
      read -r tag param envv <<<"$m"
      [ "$envv" = - ] && envv=""
      run="$name-p$procs-$tag"
      if [ $(($(date +%s) - start)) -gt "$DEADLINE" ]; then
        echo "== $run: skipped (past DEADLINE=${DEADLINE}s)"
        continue
      fi
      env $envv timeout 90 "$NB" "${common[@]}" --processes "$procs" --initiator_seg_type "$iseg" \
        --target_seg_type "$tseg" --op_type "$op" --backend_params "$param" \
        --csv "$RUNS/$run.csv" >"$RUNS/$run.txt" 2>&1
      rc=$?
      echo "== $run (rc $rc, $(($(date +%s) - start)) s)"
      [ $rc -ne 0 ] && tail -5 "$RUNS/$run.txt"
    done
  done
done

# Which protocols UCX picks (UCX's own path: host_vram_copy=ucx), one 4 MiB transfer each.
: >"$OUT/proto-info.txt"
[ "${AFTER_ONLY:-0}" = 1 ] && echo "AFTER_ONLY=1: not run" >"$OUT/proto-info.txt"
for procs in $([ "${AFTER_ONLY:-0}" = 1 ] || echo 1 2); do
  for c in "${cases[@]}"; do
    read -r name iseg tseg op <<<"$c"
    [ $(($(date +%s) - start)) -gt $((DEADLINE + 20)) ] && break 2
    {
      echo "### $name, $procs process(es): initiator $iseg, target $tseg, $op, host_vram_copy=ucx"
      UCX_PROTO_INFO=y timeout 30 "$NB" --backend UCX --processes "$procs" \
        --initiator_seg_type "$iseg" --target_seg_type "$tseg" --op_type "$op" \
        --initiator_gpu "$GPU" --target_gpu "$GPU" --start_block_size 4M --max_block_size 4M \
        --num_iter 1 --warmup_iter 0 --baseline none --backend_params host_vram_copy=ucx 2>&1 |
        head -800
    } >>"$OUT/proto-info.txt" 2>&1
  done
done

# GB/s per block size: before, after, the cuda baseline, and after / baseline
/usr/bin/python3 - "$RUNS" <<'PY' | tee "$OUT/table.txt"
import csv, glob, os, sys
out = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(out, "*.csv"))):
    name = os.path.basename(f)[:-4]
    case, procs, tag = name.rsplit("-", 2)
    with open(f) as fh:
        for r in csv.DictReader(fh):
            key = (procs, case, int(r["block_size"]))
            runs.setdefault(key, {})[tag] = r
print("cuda: the higher of the two runs' cudaMemcpyAsync baselines; GB/s = 10^9 B/s")
print(f"{'case':<10} {'proc':>4} {'block':>7} {'before':>8} {'after':>8} {'cuda':>8} "
      f"{'bef/cuda':>8} {'aft/cuda':>8} {'check':>6} {'frag4M/cuda':>11}")
for (procs, case, block) in sorted(runs, key=lambda k: (k[0], k[1], k[2])):
    v = runs[(procs, case, block)]
    def gb(t):
        return float(v[t]["gbps"]) if t in v else None
    base = [float(v[t]["baseline_gbps"]) for t in v if float(v[t]["baseline_gbps"] or 0) > 0]
    b = max(base) if base else None
    fmt = lambda x: f"{x:8.2f}" if x is not None else f"{'-':>8}"
    ratio = lambda x: f"{x / b:8.2f}" if x is not None and b else f"{'-':>8}"
    checked = "ok" if all(v[t]["checked"] == "1" for t in v) else "NO"
    print(f"{case:<10} {procs:>4} {block >> 20:>6}M {fmt(gb('before'))} {fmt(gb('after'))} "
          f"{fmt(b)} {ratio(gb('before'))} {ratio(gb('after'))} {checked:>6} "
          f"{ratio(gb('frag4M')) if 'frag4M' in v else '':>11}")
PY
if tar -czf "$OUT/runs.tar.gz" -C "$OUT" runs && [ "${KEEP:-0}" != 1 ]; then rm -rf "$RUNS"; fi
echo "total $(($(date +%s) - start)) s; table, UCX_PROTO_INFO and runs.tar.gz in $OUT"
