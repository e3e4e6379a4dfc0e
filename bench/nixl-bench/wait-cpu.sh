#!/usr/bin/env bash
# What waiting costs: the CPU of an initiator process with many requests in flight that end
# slowly, busy-polled against waited on through the agent's event fd, with NIXL's nixlbench
# (busy poll, one request in flight) as the reference, in the same run. Two sandbox hosts
# (tests/multihost/sandbox.sh) whose link is throttled with a token bucket (tc tbf, both
# directions), so that the requests' time goes to the network and not to the initiator's CPU.
#
#   bench/nixl-bench/wait-cpu.sh OUTDIR [ROUNDS]        (root; ROUNDS default 2)
#
# Environment: NIXL_BENCH (default build/ci/...), NIXLBENCH_DIR (NIXL's packed nixlbench,
# default ../shared/peers/nixl-1.4; NO_NIXL=1 skips it), RATE (the link, default 200mbit),
# DEPTH (requests in flight, default 100), SIZES (default "4K 64K 1M"), BYTES (bytes moved
# per size and tool, default 128M: the iterations are BYTES / size, at least 4 x DEPTH). Leaves OUTDIR/<round>-<size>-{poll,wait}.csv (nixl-bench, column cpu_cores:
# the initiator process's CPU over the timed part) and <round>-<size>-nixl.{log,time} (nixlbench's
# initiator; .time: its user and system CPU seconds and wall seconds, set-up included), and
# prints a table.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: wait-cpu.sh OUTDIR [ROUNDS]}
rounds=${2:-2}
sb="$root/tests/multihost/sandbox.sh"
bench=${NIXL_BENCH:-$root/build/ci/bench/nixl-bench/nixl-bench}
peer=${NIXLBENCH_DIR:-$root/../shared/peers/nixl-1.4}
rate=${RATE:-200mbit}
depth=${DEPTH:-100}
bytes_per=$(numfmt --from=iec "${BYTES:-128M}")
mkdir -p "$out"
out=$(cd "$out" && pwd)
source "$root/tests/multihost/sandbox-lib.sh"
sandbox_start 2 nixl-wait-cpu
for h in 0 1; do in_host $h tc qdisc add dev eth0 root tbf rate "$rate" burst 64kb latency 2s; done
a0=$("$sb" addr 0)
a1=$("$sb" addr 1)

iters() {  # $1 size: BYTES / size, at least 4 x DEPTH
  local n=$((bytes_per / $(numfmt --from=iec "$1")))
  ((n < 4 * depth)) && n=$((4 * depth))
  echo $n
}

run_bench() {  # $1 tag, $2 size, then nixl-bench's initiator arguments
  local tag=$1 size=$2 tgt iter
  iter=$(iters "$2")
  shift 2
  local common=(--backend UCX --start_block_size "$size" --max_block_size "$size"
    --num_iter "$iter" --warmup_iter "$depth" --total_buffer_size 256M)
  in_host 1 "$bench" --role target --listen_address "$a1" --port 5555 "${common[@]}" \
    >"$out/$tag.target.log" 2>&1 &
  tgt=$!
  for _ in $(seq 600); do
    grep -q "waiting for the initiator" "$out/$tag.target.log" 2>/dev/null && break
    sleep 0.1
  done
  in_host 0 "$bench" --role initiator --peer_ip "$a1" --port 5555 --op_type WRITE "${common[@]}" \
    --xfer_mode repost --pipeline_depth "$depth" "$@" --output_format csv \
    >"$out/$tag.csv" 2>"$out/$tag.err" || echo "nixl-bench $tag failed: $(tail -2 "$out/$tag.err")"
  wait $tgt || true
}

run_nixl() {  # $1 tag, $2 size: nixlbench, rank 0 (the initiator) on host 0 under /usr/bin/time
  local tag=$1 b iter
  b=$(numfmt --from=iec "$2")
  iter=$(iters "$2")
  local args=(--runtime_type=ASIO --asio_address="$a0" --asio_port=12345 --backend=UCX
    --op_type=WRITE --initiator_seg_type=DRAM --target_seg_type=DRAM --start_block_size="$b"
    --max_block_size="$b" --num_iter="$iter" --warmup_iter="$depth"
    --total_buffer_size=268435456)
  in_host 0 /usr/bin/time -f "%U %S %e" -o "$out/$tag.time" "$peer/nixlbench.sh" "${args[@]}" \
    >"$out/$tag.log" 2>&1 &
  local p0=$!
  sleep 1
  in_host 1 "$peer/nixlbench.sh" "${args[@]}" >"$out/$tag.r1.log" 2>&1 || true
  wait $p0 || true
}

echo "load before: $(uptime)" | tee "$out/load.txt"
for ((r = 1; r <= rounds; r++)); do
  for size in ${SIZES:-4K 64K 1M}; do
    run_bench "$r-$size-poll" "$size"
    run_bench "$r-$size-wait" "$size" --wait ${WAIT_ARGS:-}
    [[ -z "${NO_NIXL:-}" && -x "$peer/nixlbench.sh" ]] && run_nixl "$r-$size-nixl" "$size"
  done
done
echo "load after: $(uptime)" | tee -a "$out/load.txt"

/usr/bin/python3 - "$out" "$depth" "$rate" <<'EOF'
import csv, glob, os, sys
out, depth, rate = sys.argv[1], sys.argv[2], sys.argv[3]
print(f"link {rate}, WRITE, nixl-bench {depth} requests in flight; nixlbench one (busy poll).")
print("cores: the initiator process's CPU / wall time (its posting and waiting thread's alone).")
print("| round | size | busy poll: GB/s | cores | --wait: GB/s | cores | process CPU us a request | NIXL nixlbench cores (whole run) |")
print("|---|---|---|---|---|---|---|---|")
def point(p):
    with open(p) as fh:
        return list(csv.DictReader(l for l in fh if not l.startswith("#")))[0]
def cells(p):
    try:
        x = point(p)
        return [f"{float(x['gbps']):.4f}", f"{float(x['cpu_cores']):.3f} ({float(x['thread_cpu_cores']):.3f})"]
    except Exception:
        return ["failed", "-"]
for f in sorted(glob.glob(os.path.join(out, "*-poll.csv"))):
    tag = os.path.basename(f)[:-len("-poll.csv")]
    r, size = tag.split("-", 1)
    w = os.path.join(out, tag + "-wait.csv")
    per = "-"
    try:
        x = point(w)
        per = f"{float(x['cpu_cores']) * float(x['block_size']) / (float(x['gbps']) * 1e3):.1f}"
    except Exception:
        pass
    nixl = "-"
    t = os.path.join(out, f"{tag}-nixl.time")
    if os.path.exists(t):
        try:
            u, s, e = map(float, open(t).read().split()[-3:])
            nixl = f"{(u + s) / e:.3f}"
        except ValueError:
            nixl = "failed"
    print("| " + " | ".join([r, size] + cells(f) + cells(w) + [per, nixl]) + " |")
EOF
