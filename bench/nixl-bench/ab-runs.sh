#!/usr/bin/env bash
# Two builds of nixl-bench, run alternately over the same points in one session, so that a change
# of the library can be read against the machine's own drift:
#   bench/nixl-bench/ab-runs.sh BEFORE_BIN AFTER_BIN [out-dir] [rounds] [which...]
# which: ucx (two processes, DRAM WRITE), file (POSIX, DRAM -> file), libfabric (two processes,
# tcp), cuda, ucx-vram, gds (one GPU). Default: ucx file libfabric. Each round runs every case with
# BEFORE then AFTER; the table gives GB/s per point and round, and AFTER/BEFORE of the medians.
set -uo pipefail
before=${1:?path of the first nixl-bench}
after=${2:?path of the second nixl-bench}
out=${3:-/tmp/nixl-bench-ab}
rounds=${4:-2}
shift $(($# >= 4 ? 4 : $#))
which=${*:-ucx file libfabric}
mkdir -p "$out"
declare -A args
args[ucx]="--backend UCX --processes 2 --op_type WRITE --start_block_size 4K --max_block_size 64M
  --num_iter 200 --warmup_iter 20 --large_blk_iter_ftr 4 --check_consistency --baseline none"
args[file]="--backend POSIX --target_seg_type FILE --op_type WRITE --start_block_size 4K
  --max_block_size 1M --start_batch_size 16 --max_batch_size 16 --num_iter 200 --warmup_iter 20
  --check_consistency --filepath /tmp --baseline none"
args[libfabric]="--backend LIBFABRIC --processes 2 --op_type WRITE --start_block_size 4K
  --max_block_size 16M --num_iter 100 --warmup_iter 10 --large_blk_iter_ftr 4 --check_consistency
  --baseline none"
args[cuda]="--backend CUDA --processes 1 --initiator_seg_type VRAM --target_seg_type VRAM
  --start_block_size 64K --max_block_size 256M --num_iter 200 --warmup_iter 20
  --large_blk_iter_ftr 4 --check_consistency --baseline none"
args[ucx-vram]="--backend UCX --processes 2 --initiator_seg_type VRAM --target_seg_type VRAM
  --start_block_size 64K --max_block_size 64M --num_iter 200 --warmup_iter 20
  --large_blk_iter_ftr 4 --check_consistency --baseline none"
args[gds]="--backend GDS --initiator_seg_type VRAM --target_seg_type FILE --op_type WRITE
  --start_block_size 64K --max_block_size 16M --num_iter 50 --warmup_iter 5 --filepath /tmp
  --check_consistency --baseline none"
echo "\$ uptime: $(uptime)"
for r in $(seq 1 "$rounds"); do
  for w in $which; do
    for side in before after; do
      bin=$before
      [[ $side == after ]] && bin=$after
      # shellcheck disable=SC2086
      if ! "$bin" ${args[$w]} --csv "$out/$w.$side.$r.csv" >"$out/$w.$side.$r.txt" 2>&1; then
        echo "$w $side round $r failed:"
        tail -5 "$out/$w.$side.$r.txt"
      fi
    done
  done
done
echo "\$ uptime: $(uptime)"
python3 - "$out" "$rounds" $which <<'EOF'
import csv, statistics, sys
out, rounds, which = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(w, side, r):
    try:
        with open(f"{out}/{w}.{side}.{r}.csv") as f:
            return {(int(x["block_size"]), int(x["batch_size"])): float(x["gbps"]) for x in csv.DictReader(f)}
    except (OSError, ValueError, KeyError):
        return {}
for w in which:
    b = [load(w, "before", r) for r in range(1, rounds + 1)]
    a = [load(w, "after", r) for r in range(1, rounds + 1)]
    pts = sorted(set().union(*b, *a))
    if not pts:
        print(f"\n{w}: no result"); continue
    print(f"\n{w}: GB/s per round (before | after), after/before of the medians")
    for p in pts:
        bv = [d[p] for d in b if p in d]; av = [d[p] for d in a if p in d]
        ratio = statistics.median(av) / statistics.median(bv) if bv and av and statistics.median(bv) > 0 else float("nan")
        fmt = lambda v: " ".join(f"{x:7.3f}" for x in v)
        print(f"  {p[0]:>10} x{p[1]:<4} {fmt(bv)} | {fmt(av)}   {ratio:5.2f}")
EOF
