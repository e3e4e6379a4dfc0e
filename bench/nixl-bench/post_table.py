"""How long post() takes on each path: from every nixl-bench CSV under the folders given, one line
per run (backend, op, memory, processes, block sizes), the average post time per request over
its points (lowest - highest), the highest 99th percentile and the point it was seen at, and
whether every point stayed under the goal (default 20 us, --goal US).

    post_table.py [--goal US] DIR...
"""

import csv
import glob
import os
import sys


def size(b):
    b = int(b)
    if b >= 1 << 20:
        return f"{b >> 20} MiB"
    return f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"


def rows(path):
    with open(path, errors="replace") as f:
        lines = [l for l in f.read().splitlines() if "UCX " not in l]
    head = next((i for i, l in enumerate(lines) if l.startswith("backend,")), None)
    return list(csv.DictReader(lines[head:])) if head is not None else []


def main():
    args = sys.argv[1:]
    goal = 20.0
    if args[:1] == ["--goal"]:
        goal, args = float(args[1]), args[2:]
    print(f"| run | path | blocks x batch | post avg µs (lowest - highest point) | highest p99 µs (at) "
          f"| every p99 < {goal:g} µs |")
    print("|---|---|---|---|---|---|")
    for d in args:
        for f in sorted(glob.glob(os.path.join(d, "**", "*.csv"), recursive=True)):
            rs = rows(f)
            if not rs:
                continue
            r0 = rs[0]
            path = (f"{r0['backend']} {r0['op']} {r0['initiator_seg']} -> {r0['target_seg']}, "
                    f"{r0['processes']} process{'es' if r0['processes'] != '1' else ''}")
            avg = [float(r["avg_post_us"]) for r in rs]
            worst = max(rs, key=lambda r: float(r["p99_post_us"]))
            blocks = f"{size(rs[0]['block_size'])} - {size(rs[-1]['block_size'])}"
            batches = sorted({int(r["batch_size"]) for r in rs})
            blocks += f" x {'/'.join(map(str, batches))}"
            ok = all(float(r["p99_post_us"]) < goal for r in rs)
            print(f"| {os.path.relpath(f, d)} | {path} | {blocks} | {min(avg):.2f} - {max(avg):.2f} "
                  f"| {float(worst['p99_post_us']):.2f} ({size(worst['block_size'])} x "
                  f"{worst['batch_size']}) | {'yes' if ok else 'no'} |")


if __name__ == "__main__":
    main()
