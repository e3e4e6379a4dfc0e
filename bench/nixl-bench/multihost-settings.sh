#!/usr/bin/env bash
# READ and WRITE between two sandbox hosts at 8 KiB, 64 KiB and 1 MiB under four settings of the
# UCX backend (defaults, progress_spin_us=1000, no progress thread, 256 KiB TCP segments), then
# UCX's own round trips (ucp_am_lat, ucp_put_lat, 8 bytes). docs/history/2026-11-30-performance-ucx-across-hosts.md.
#   bench/nixl-bench/multihost-settings.sh OUTDIR          (root)
# Environment: NIXL_BENCH (default build/ci/...), PERFTEST (ucx_perftest; default the one beside
# the libucp nixl-bench loads), ITER (default 2000).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: multihost-settings.sh OUTDIR}
mkdir -p "$out"
sb="$root/tests/multihost/sandbox.sh"
bench=${NIXL_BENCH:-$root/build/ci/bench/nixl-bench/nixl-bench}
perftest=${PERFTEST:-}
if [[ -z $perftest ]]; then
  ucp=$(ldd "$bench" 2>/dev/null | awk '/libucp/ {print $3}')
  [[ -n $ucp ]] && perftest=$(dirname "$(dirname "$ucp")")/bin/ucx_perftest
fi
iter=${ITER:-2000}
d=$(mktemp -d /tmp/nixl-mh-settings.XXXXXX)
trap 'SANDBOX_OWNER=$$ "$sb" down "$d/sb" || true; rm -rf "$d"' EXIT INT TERM
SANDBOX_OWNER=$$ "$sb" up "$d/sb" 2 >/dev/null
a1=$("$sb" addr 1)
run() {  # OP SIZE TAG [nixl-bench arguments]
  local op=$1 sz=$2 tag=$3
  shift 3
  local sizes=(--start_block_size "$sz" --max_block_size "$sz" --start_batch_size 1
    --max_batch_size 1 --num_iter "$iter" --warmup_iter 100 --large_blk_iter_ftr 16
    --total_buffer_size 1G)
  "$sb" exec "$d/sb" 1 "$bench" --role target --listen_address "$a1" --port 5555 "${sizes[@]}" \
    "$@" >"$out/$op-$sz-$tag.target.log" 2>&1 &
  local tgt=$!
  for _ in $(seq 100); do
    grep -q "waiting for the initiator" "$out/$op-$sz-$tag.target.log" && break
    sleep 0.1
  done
  "$sb" exec "$d/sb" 0 "$bench" --role initiator --peer_ip "$a1" --port 5555 --op_type "$op" \
    "${sizes[@]}" "$@" --csv "$out/$op-$sz-$tag.csv" >/dev/null 2>&1 || true
  wait $tgt || true
  echo "$op $sz $tag GB/s,us: $(tail -1 "$out/$op-$sz-$tag.csv" | cut -d, -f12,13)"
}
for op in READ WRITE; do
  for sz in 8K 64K 1M; do
    run $op $sz default
    run $op $sz spin1000 --backend_params progress_spin_us=1000
    run $op $sz nopt --enable_pt false
    run $op $sz seg256k --backend_params engine_config=TCP_TX_SEG_SIZE=256k,TCP_RX_SEG_SIZE=256k
  done
done
[[ -x ${perftest:-/nonexistent} ]] || exit 0
for t in ucp_am_lat ucp_put_lat; do
  "$sb" exec "$d/sb" 1 env UCX_TLS=tcp "$perftest" -p 13500 >/dev/null 2>&1 &
  sleep 0.5
  echo "$t 8 B: $("$sb" exec "$d/sb" 0 env UCX_TLS=tcp "$perftest" "$a1" -p 13500 -t $t -s 8 \
    -n 20000 2>&1 | grep Final)"
  wait
done
