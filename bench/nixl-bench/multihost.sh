#!/usr/bin/env bash
# nixl-bench between two sandbox hosts (tests/multihost/sandbox.sh: separate network, IPC, PID,
# UTS and mount namespaces joined by a bridge), with its baselines in the same run and the same
# pair of hosts: iperf3 (one TCP stream), UCX's own ucx_perftest (ucp_put_bw for WRITE,
# ucp_get for READ, one operation in flight as a request of nixl-bench is) and NIXL's
# nixlbench (../shared/peers/nixl-1.4). Rounds alternate them, so that the machine's load hits
# them alike.
#
#   bench/nixl-bench/multihost.sh OUTDIR [ROUNDS]         (root; ROUNDS default 2)
#
# Environment: NIXL_BENCH (nixl-bench binary, default build/ci/...), NIXLBENCH_DIR (NIXL's
# packed nixlbench), OPS (default "WRITE READ"), ITER (num_iter, default 1000), DEPTH (when set,
# nixl-bench also runs WRITE with --pipeline_depth DEPTH), ETCD=1 (nixl-bench meets through an
# etcd on the target host instead of the listener), START (first block size, default 4K), MAX
# (last block size, default 64M), BATCH (descriptors per request, default 1; both tools), WARMUP
# (warm-up iterations, default 100), TOTAL (buffer size, default 1G; both tools),
# NO_NIXL=1 (skip NIXL's nixlbench), NO_PERFTEST=1 (skip ucx_perftest and put_flush), PERFTEST (its binary,
# default the one of the UCX nixl-bench loads; not UCX_*, which UCX would warn about), PERFTEST_TLS (UCX_TLS for ucx_perftest,
# default tcp), BENCH_ARGS (more nixl-bench arguments, both sides, e.g.
# "--backend_params ucx_error_handling_mode=ucx_peer"). UCX_* variables reach both benchmarks.
# LIBFABRIC=1 gives each host a second link (eth1) and adds, per round, nixl-bench --backend
# LIBFABRIC (tcp;ofi_rxm, WRITE or the first of OPS) over one rail (eth0) and two (eth0,eth1),
# and iperf3 over both links at once (one stream each); multihost_libfabric_table.py sums them up.
# WRITE also runs bench/ucx-probes/put_flush (a put and an endpoint flush per turn, what the UCX
# backend does for a request of one block; built here against the headers of the UCX that
# nixl-bench loads, skipped where there are none; its target progresses its worker as the
# backend's progress thread does, sleeping after 50 us without work, or PUTFLUSH_SPIN_US).
# Leaves OUTDIR/<round>-{iperf3.json,<op>-nixl-bench.csv,<op>-nixlbench.log,<op>-perftest.txt,
# WRITE-putflush.txt} and prints a summary per op.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: multihost.sh OUTDIR [ROUNDS]}
rounds=${2:-2}
sb="$root/tests/multihost/sandbox.sh"
bench=${NIXL_BENCH:-$root/build/ci/bench/nixl-bench/nixl-bench}
peer=${NIXLBENCH_DIR:-$root/../shared/peers/nixl-1.4}
ops=${OPS:-${OP:-WRITE READ}}
iter=${ITER:-1000}
perftest=${PERFTEST:-}
if [[ -z $perftest ]]; then
  ucp=$(ldd "$bench" 2>/dev/null | awk '/libucp/ {print $3}')
  [[ -n $ucp ]] && perftest=$(dirname "$(dirname "$ucp")")/bin/ucx_perftest
fi
[[ -x ${perftest:-/nonexistent} ]] || perftest=$(command -v ucx_perftest || true)
mkdir -p "$out"
out=$(cd "$out" && pwd)
putflush=""
ucx_prefix=$(dirname "$(dirname "$(ldd "$bench" 2>/dev/null | awk '/libucp/ {print $3; exit}')")")
if [[ -f $ucx_prefix/include/ucp/api/ucp.h ]] &&
  g++ -O2 -std=c++20 "$root/bench/ucx-probes/put_flush.cpp" -I"$ucx_prefix/include" \
    -L"$ucx_prefix/lib" -Wl,-rpath,"$ucx_prefix/lib" -lucp -lucs -pthread -o "$out/put_flush"; then
  putflush=$out/put_flush
else
  echo "put_flush not built (no UCX headers at '$ucx_prefix/include')" >&2
fi
source "$root/tests/multihost/sandbox-lib.sh"
SANDBOX_LINKS=${LIBFABRIC:+2} sandbox_start 2 nixl-mh-bench
dir=$sandbox_dir
wait_target() {  # until the target says it waits for the initiator
  for _ in $(seq 600); do
    grep -q "waiting for the initiator" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the target did not start: $(cat "$1")" >&2
  return 1
}
a0=$("$sb" addr 0)
a1=$("$sb" addr 1)
start=${START:-4K}
max=${MAX:-64M}
batch=${BATCH:-1}
warmup=${WARMUP:-100}
total=${TOTAL:-1G}
sizes=(--start_block_size "$start" --max_block_size "$max" --start_batch_size "$batch"
  --max_batch_size "$batch" --num_iter "$iter" --warmup_iter "$warmup" --large_blk_iter_ftr 16
  --total_buffer_size "$total")

etcd_url=""
if [[ -n "${ETCD:-}" ]]; then
  etcd_url="http://$a1:2379"
  in_host 1 etcd --name mhb --data-dir "$dir/etcd" --listen-client-urls "$etcd_url" \
    --advertise-client-urls "$etcd_url" --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster mhb=http://127.0.0.1:2380 --log-level error >"$out/etcd.log" 2>&1 &
  sleep 2
fi

# One op of one round: nixl-bench (with --pipeline_depth when $depth is set), ucx_perftest and
# NIXL's nixlbench.
run_op() {
  local r=$1 op=$2 depth=${3:-} tag=$2 extra=(${BENCH_ARGS:-})
  if [[ -n $depth ]]; then
    tag=$op-depth$depth
    extra+=(--pipeline_depth "$depth")
  fi
  # nixl-bench: target on host 1, initiator on host 0
  if [[ -n "$etcd_url" ]]; then
    in_host 1 "$bench" --role target --etcd_endpoints "$etcd_url" "${sizes[@]}" ${BENCH_ARGS:-} \
      >"$out/$r-$tag-nixl-bench.target.log" 2>&1 &
    tgt=$!
    wait_target "$out/$r-$tag-nixl-bench.target.log"
    in_host 0 "$bench" --role initiator --etcd_endpoints "$etcd_url" --op_type "$op" \
      "${sizes[@]}" "${extra[@]}" --output_format csv >"$out/$r-$tag-nixl-bench.csv" 2>"$out/$r-$tag-nixl-bench.err"
  else
    in_host 1 "$bench" --role target --listen_address "$a1" --port 5555 "${sizes[@]}" ${BENCH_ARGS:-} \
      >"$out/$r-$tag-nixl-bench.target.log" 2>&1 &
    tgt=$!
    wait_target "$out/$r-$tag-nixl-bench.target.log"
    in_host 0 "$bench" --role initiator --peer_ip "$a1" --port 5555 --op_type "$op" \
      "${sizes[@]}" "${extra[@]}" --output_format csv >"$out/$r-$tag-nixl-bench.csv" 2>"$out/$r-$tag-nixl-bench.err"
  fi
  wait $tgt || true

  [[ -z $depth ]] && perftest_op "$r" "$op"
  [[ -z $depth && $op == WRITE ]] && putflush_op "$r"
  # NIXL's nixlbench: rank 0 (the initiator) binds the ASIO port on host 0, rank 1 on host 1
  [[ -n "${NO_NIXL:-}" || -n $depth ]] && return 0
  args=(--runtime_type=ASIO --asio_address="$a0" --asio_port=12345 --backend=UCX
    --op_type="$op" --initiator_seg_type=DRAM --target_seg_type=DRAM --start_block_size="$(bytes "$start")"
    --max_block_size="$(bytes "$max")" --start_batch_size="$batch" --max_batch_size="$batch"
    --num_iter="$iter" --warmup_iter="$warmup" --large_blk_iter_ftr=16
    --total_buffer_size="$(bytes "$total")")
  in_host 0 "$peer/nixlbench.sh" "${args[@]}" >"$out/$r-$op-nixlbench.log" 2>&1 &
  p0=$!
  sleep 1
  in_host 1 "$peer/nixlbench.sh" "${args[@]}" >"$out/$r-$op-nixlbench.r1.log" 2>&1 || true
  wait $p0 || true
}

# ucx_perftest, one size at a time (its server serves one test): put or get bandwidth with one
# operation in flight, the same sizes as the sweep.
perftest_op() {
  local r=$1 op=$2 test=ucp_put_bw f="$out/$1-$2-perftest.txt"
  [[ $op == READ ]] && test=ucp_get
  : >"$f"
  [[ -n "${NO_PERFTEST:-}" || -z $perftest ]] && return 0
  local b n
  for ((b = $(bytes "$start"); b <= $(bytes "$max"); b *= 2)); do
    n=$((iter * 1048576 / b))
    ((b <= 1048576)) && n=$iter
    ((n < 20)) && n=20
    in_host 1 env UCX_TLS="${PERFTEST_TLS:-tcp}" "$perftest" -p 13337 >/dev/null 2>&1 &
    local srv=$!
    local ok=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      sleep 0.2
      if in_host 0 env UCX_TLS="${PERFTEST_TLS:-tcp}" "$perftest" "$a1" -p 13337 -t "$test" \
        -s "$b" -n "$n" -w $((n / 10 + 1)) -O 1 >"$f.tmp" 2>&1; then
        ok=1
        break
      fi
    done
    kill $srv 2>/dev/null || true
    wait $srv 2>/dev/null || true
    if [[ -n $ok ]]; then
      echo "size $b $(grep 'Final:' "$f.tmp" | tail -1)" >>"$f"
    else
      echo "size $b failed: $(tail -2 "$f.tmp" | tr '\n' ' ')" >>"$f"
    fi
  done
  rm -f "$f.tmp"
}
# put_flush: the same sizes and counts as ucx_perftest, the target progressing its worker
putflush_op() {
  local f="$out/$1-WRITE-putflush.txt" b list=()
  : >"$f"
  [[ -n "${NO_PERFTEST:-}" || -z $putflush ]] && return 0
  for ((b = $(bytes "$start"); b <= $(bytes "$max"); b *= 2)); do list+=("$b"); done
  in_host 1 "$putflush" target "$a1" 13338 "$(bytes "$max")" ${PUTFLUSH_SPIN_US:-} >"$f.target" 2>&1 &
  local tgt=$!
  wait_target "$f.target" || return 0
  in_host 0 "$putflush" initiator "$a1" 13338 "$iter" "${list[@]}" >"$f" 2>&1 || true
  wait $tgt || true
  rm -f "$f.target"
}
bytes() {  # 4K -> 4096
  local v=${1^^}
  case $v in
    *K) echo $((${v%K} << 10)) ;;
    *M) echo $((${v%M} << 20)) ;;
    *G) echo $((${v%G} << 30)) ;;
    *) echo "$v" ;;
  esac
}

# LIBFABRIC: one rail, two rails, and iperf3 over both links (listener meeting only)
lf_round() {
  local r=$1 op=$2 b1 s1 s2 c1 rails tag lfenv tgt
  # LIBFABRIC: one rail, two rails, and iperf3 over both links (listener meeting only)
  b1=$("$sb" addr2 1)
  in_host 1 iperf3 -s -1 -B "$a1" -p 5201 >/dev/null 2>&1 &
  s1=$!
  in_host 1 iperf3 -s -1 -B "$b1" -p 5202 >/dev/null 2>&1 &
  s2=$!
  sleep 0.5
  in_host 0 iperf3 -c "$a1" -p 5201 -P 1 -t 10 -J >"$out/$r-iperf3-link1.json" &
  c1=$!
  in_host 0 iperf3 -c "$b1" -p 5202 -P 1 -t 10 -J >"$out/$r-iperf3-link2.json"
  wait $c1 $s1 $s2 || true
  for rails in eth0 eth0,eth1; do
    tag=lf$(($(tr -cd , <<<"$rails" | wc -c) + 1))
    lfenv=(env FI_PROVIDER="tcp;ofi_rxm" NIXL_LIBFABRIC_INTERFACES="$rails")
    in_host 1 "${lfenv[@]}" "$bench" --backend LIBFABRIC --role target --listen_address "$a1" \
      --port 5555 "${sizes[@]}" >"$out/$r-nixl-bench-$tag.target.log" 2>&1 &
    tgt=$!
    wait_target "$out/$r-nixl-bench-$tag.target.log"
    in_host 0 "${lfenv[@]}" "$bench" --backend LIBFABRIC --role initiator --peer_ip "$a1" \
      --port 5555 --op_type "$op" "${sizes[@]}" --output_format csv \
      >"$out/$r-nixl-bench-$tag.csv" 2>"$out/$r-nixl-bench-$tag.err"
    wait $tgt || true
  done
}

echo "load before: $(uptime)" | tee "$out/load.txt"
for ((r = 1; r <= rounds; r++)); do
  # iperf3: one stream, 10 s, host 0 -> host 1 (the direction of a WRITE), where installed
  if command -v iperf3 >/dev/null; then
    in_host 1 iperf3 -s -1 -B "$a1" -p 5201 >/dev/null 2>&1 &
    srv=$!
    sleep 0.5
    in_host 0 iperf3 -c "$a1" -p 5201 -P 1 -t 10 -J >"$out/$r-iperf3.json"
    wait $srv || true
  fi

  for op in $ops; do run_op "$r" "$op"; done
  [[ -n "${DEPTH:-}" ]] && run_op "$r" WRITE "$DEPTH"
  [[ -n "${LIBFABRIC:-}" ]] && lf_round "$r" "${ops%% *}"
  echo "round $r done: $(uptime)" | tee -a "$out/load.txt"
done
for op in $ops; do
  echo
  echo "== $op"
  /usr/bin/python3 "$root/bench/nixl-bench/multihost_table.py" "$out" "$rounds" "$op" ${DEPTH:+"$DEPTH"}
done
if [[ -n "${LIBFABRIC:-}" ]]; then
  echo
  /usr/bin/python3 "$root/bench/nixl-bench/multihost_libfabric_table.py" "$out" "$rounds"
fi
