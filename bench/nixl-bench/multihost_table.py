"""Summary table of bench/nixl-bench/multihost.sh for one op: per block size, the best of the
rounds for nixl-bench, UCX's ucx_perftest, NIXL's nixlbench and (WRITE) bench/ucx-probes/put_flush
(a put and a flush per turn), next to iperf3's single-stream
TCP rate (best round), in GB/s (10^9 B/s), and the ratios the goals are stated in.

    multihost_table.py OUTDIR ROUNDS OP [DEPTH]

With DEPTH, the WRITE table gains nixl-bench's run with --pipeline_depth DEPTH.
"""

import json
import sys


def iperf3(path):
    with open(path) as f:
        j = json.load(f)
    return j["end"]["sum_received"]["bits_per_second"] / 8e9


def nixl_bench(path):
    """nixl-bench's CSV; UCX writes its own warnings to the same stdout, so lines before the
    header and lines that are not rows of it are skipped."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    head = next((l for l in lines if l.startswith("backend,")), None)
    if head is None:
        return {}
    names = head.split(",")
    out = {}
    for line in lines:
        w = line.split(",")
        if len(w) != len(names) or line is head or "UCX " in line:
            continue
        r = dict(zip(names, w))
        try:
            out[int(r["block_size"])] = (float(r["gbps"]), float(r["avg_lat_us"]))
        except ValueError:
            pass
    return out


def nixlbench(path):
    """Rows of NIXL's table: block size, batch size, B/W (GB/Sec), Avg Lat. (us), ..."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            w = line.split()
            if len(w) >= 4 and w[0].isdigit() and w[1].isdigit():
                try:
                    out[int(w[0])] = (float(w[2]), float(w[3]))
                except ValueError:
                    pass
    return out


def perftest(path):
    """Lines 'size B Final: iters p50 avg overall bw_avg bw_overall mr_avg mr_overall' (usec,
    MB/s with MB = 2^20 as ucx_perftest prints them)."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 11 and w[0] == "size" and w[2] == "Final:":
                out[int(w[1])] = (float(w[8]) * 1048576 / 1e9, float(w[5]))
    return out


def putflush(path):
    """bench/ucx-probes/put_flush's lines 'putflush bytes turns avg_us GB/s'."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) == 5 and w[0] == "putflush":
                out[int(w[1])] = (float(w[4]), float(w[3]))
    return out


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def best(dst, src):
    for b, v in src.items():
        if b not in dst or v[0] > dst[b][0]:
            dst[b] = v


def ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def main():
    d, rounds, op = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    depth = sys.argv[4] if len(sys.argv) > 4 and op == "WRITE" else None
    tcp, ours, ucx, theirs, deep, flushed = [], {}, {}, {}, {}, {}
    for r in range(1, rounds + 1):
        try:
            tcp.append(iperf3(f"{d}/{r}-iperf3.json"))
        except (OSError, KeyError, ValueError):
            pass
        for fn, name, dst in (
            (nixl_bench, f"{op}-nixl-bench.csv", ours),
            (perftest, f"{op}-perftest.txt", ucx),
            (nixlbench, f"{op}-nixlbench.log", theirs),
            (nixl_bench, f"{op}-depth{depth}-nixl-bench.csv", deep),
            (putflush, f"{op}-putflush.txt", flushed),
        ):
            try:
                best(dst, fn(f"{d}/{r}-{name}"))
            except (OSError, KeyError, ValueError):
                pass
    base = max(tcp) if tcp else 0.0
    print(f"iperf3, one stream: {base:.3f} GB/s (rounds: {', '.join(f'{t:.3f}' for t in tcp)})")
    print()
    head = ("| block | nixl-bench GB/s | µs | ucx_perftest GB/s | µs | NIXL GB/s | µs "
            "| / ucx_perftest | / NIXL | / iperf3 |")
    rule = "|---|---|---|---|---|---|---|---|---|---|"
    if flushed:  # the transport's bound for the backend's pattern (a put and a flush)
        head += " put+flush GB/s | µs | / put+flush |"
        rule += "---|---|---|"
    if depth:
        head += f" depth {depth} GB/s | depth {depth} / iperf3 |"
        rule += "---|---|"
    print(head)
    print(rule)
    zero = (0.0, 0.0)
    for b in sorted(set(ours) | set(ucx) | set(theirs)):
        o, u, t = ours.get(b, zero), ucx.get(b, zero), theirs.get(b, zero)
        row = (f"| {size(b)} | {o[0]:.3f} | {o[1]:.1f} | {u[0]:.3f} | {u[1]:.1f} | {t[0]:.3f} "
               f"| {t[1]:.1f} | {ratio(o[0], u[0])} | {ratio(o[0], t[0])} | {ratio(o[0], base)} |")
        if flushed:
            f = flushed.get(b, zero)
            row += f" {f[0]:.3f} | {f[1]:.1f} | {ratio(o[0], f[0])} |"
        if depth:
            p = deep.get(b, zero)
            row += f" {p[0]:.3f} | {ratio(p[0], base)} |"
        print(row)


if __name__ == "__main__":
    main()
