"""Summary table of bench/nixl-bench/multihost.sh: per block size, the best of the rounds for
nixl-bench and NIXL's nixlbench, next to iperf3's single-stream TCP rate (best round), in GB/s.

    multihost_table.py OUTDIR ROUNDS
"""

import csv
import json
import sys


def iperf3(path):
    with open(path) as f:
        j = json.load(f)
    return j["end"]["sum_received"]["bits_per_second"] / 8e9


def nixl_bench(path):
    out = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            out[int(r["block_size"])] = (float(r["gbps"]), float(r["avg_lat_us"]))
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


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    d, rounds = sys.argv[1], int(sys.argv[2])
    tcp, ours, theirs = [], {}, {}
    for r in range(1, rounds + 1):
        try:
            tcp.append(iperf3(f"{d}/{r}-iperf3.json"))
        except (OSError, KeyError, ValueError):
            pass
        for src, dst in ((nixl_bench, ours), (nixlbench, theirs)):
            name = "nixl-bench.csv" if src is nixl_bench else "nixlbench.log"
            try:
                for b, v in src(f"{d}/{r}-{name}").items():
                    if b not in dst or v[0] > dst[b][0]:
                        dst[b] = v
            except (OSError, KeyError, ValueError):
                pass
    base = max(tcp) if tcp else 0.0
    print(f"iperf3, one stream: {base:.3f} GB/s (rounds: {', '.join(f'{t:.3f}' for t in tcp)})")
    print()
    print("| block | nixl-bench GB/s | latency µs | NIXL nixlbench GB/s | latency µs "
          "| nixl-bench / iperf3 | nixl-bench / NIXL |")
    print("|---|---|---|---|---|---|---|")
    for b in sorted(set(ours) | set(theirs)):
        o = ours.get(b, (0.0, 0.0))
        t = theirs.get(b, (0.0, 0.0))
        ri = f"{o[0] / base:.2f}" if base else "-"
        rn = f"{o[0] / t[0]:.2f}" if t[0] else "-"
        print(f"| {size(b)} | {o[0]:.3f} | {o[1]:.1f} | {t[0]:.3f} | {t[1]:.1f} | {ri} | {rn} |")


if __name__ == "__main__":
    main()
