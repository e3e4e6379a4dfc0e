"""Summary of the LIBFABRIC rounds of bench/nixl-bench/multihost.sh (LIBFABRIC=1): per block
size, the best round of nixl-bench over UCX, LIBFABRIC with one rail and with two, next to
iperf3 (one stream on link 1; one stream on each link at once), in GB/s.

    multihost_libfabric_table.py OUTDIR ROUNDS
"""

import sys

from multihost_table import iperf3, nixl_bench, size


def best(d, rounds, name):
    out = {}
    for r in range(1, rounds + 1):
        try:
            for b, v in nixl_bench(f"{d}/{r}-{name}").items():
                if b not in out or v[0] > out[b][0]:
                    out[b] = v
        except (OSError, KeyError, ValueError):
            pass
    return out


def main():
    d, rounds = sys.argv[1], int(sys.argv[2])
    one, two = [], []
    for r in range(1, rounds + 1):
        try:
            one.append(iperf3(f"{d}/{r}-iperf3.json"))
        except (OSError, KeyError, ValueError):
            pass
        try:
            two.append(iperf3(f"{d}/{r}-iperf3-link1.json") + iperf3(f"{d}/{r}-iperf3-link2.json"))
        except (OSError, KeyError, ValueError):
            pass
    i1 = max(one) if one else 0.0
    i2 = max(two) if two else 0.0
    print(f"iperf3: one link {i1:.3f} GB/s, both links at once {i2:.3f} GB/s")
    print()
    ucx, lf1, lf2 = (best(d, rounds, n) for n in
                     ("nixl-bench.csv", "nixl-bench-lf1.csv", "nixl-bench-lf2.csv"))
    print("| block | UCX GB/s | LIBFABRIC 1 rail | LIBFABRIC 2 rails | 1 rail / iperf3 "
          "| 2 rails / 1 rail | 2 rails / iperf3 both links |")
    print("|---|---|---|---|---|---|---|")
    for b in sorted(set(ucx) | set(lf1) | set(lf2)):
        u, a, c = (x.get(b, (0.0, 0.0))[0] for x in (ucx, lf1, lf2))
        r1 = f"{a / i1:.2f}" if i1 else "-"
        r2 = f"{c / a:.2f}" if a else "-"
        r3 = f"{c / i2:.2f}" if i2 else "-"
        print(f"| {size(b)} | {u:.3f} | {a:.3f} | {c:.3f} | {r1} | {r2} | {r3} |")


if __name__ == "__main__":
    main()
