#!/usr/bin/env bash
# The OBJ numbers of docs/performance.md: rounds of nixl-bench --backend OBJ (each run starts its
# own s3rver and measures curl on the same objects), PUT and GET alternated, at 1 MiB and 16 MiB
# with 1, 2, 4 and 8 objects in flight, the load printed before each run.
#   bench/nixl-bench/obj-runs.sh NIXL_BENCH [ROUNDS] > out.txt
set -euo pipefail
bench=${1:?usage: $0 path/to/nixl-bench [rounds]}
rounds=${2:-3}
for r in $(seq "$rounds"); do
  for op in WRITE READ; do
    for size in 1M 16M; do
      iters=32
      [[ $size == 16M ]] && iters=8
      echo "=== round $r $op $size; $(uptime)"
      "$bench" --backend OBJ --op_type "$op" --start_block_size "$size" --max_block_size "$size" \
        --start_batch_size 1 --max_batch_size 8 --num_iter "$iters" --warmup_iter 2 \
        --large_blk_iter_ftr 1
    done
  done
done
