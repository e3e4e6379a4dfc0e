#!/usr/bin/env python3
"""Read/write bandwidth of the POSIX backend next to fio (io_uring engine by default), same file, same
sizes, same queue depth, runs interleaved in one session. Prints a Markdown table (median of
--reps runs per cell, GB/s = 1e9 bytes/s) and, with --jsonl, every raw measurement.

  /usr/bin/python3 bench/posix/compare_fio.py --bench build/bench/posix/nixl_posix_bench \
      --dir /tmp --size 1G --bs 4K,1M,16M --iodepth 64 --reps 3 --modes buffered,direct
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_nixl(a, path, op, bs, direct):
    cmd = [a.bench, "--file", path, "--size", a.size, "--bs", bs, "--op", op,
           "--engine", a.engine, "--iodepth", str(a.iodepth), "--loops", str(a.loops)]
    if direct:
        cmd.append("--direct")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rec = json.loads(out.strip().splitlines()[-1])
    return rec["gbps"], cmd


def run_fio(a, path, op, bs, direct):
    cmd = [a.fio, "--name=posix-cmp", f"--filename={path}", f"--ioengine={a.fio_engine}", f"--rw={op}",
           f"--bs={bs}", f"--size={a.size}", f"--iodepth={a.iodepth}", f"--direct={int(direct)}",
           "--invalidate=0", f"--loops={a.loops}", "--output-format=json"] + shlex.split(a.fio_extra)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job[op]
    return side["io_bytes"] / (side["runtime"] / 1000.0) / 1e9, cmd


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="path of nixl_posix_bench")
    p.add_argument("--fio", default="fio")
    p.add_argument("--dir", default="/tmp", help="folder for the test file")
    p.add_argument("--size", default="1G")
    p.add_argument("--bs", default="4K,1M,16M")
    p.add_argument("--ops", default="read,write")
    p.add_argument("--modes", default="buffered,direct")
    p.add_argument("--engine", default="URING", help="nixl engine: URING, AIO or POSIX")
    p.add_argument("--fio-engine", default="io_uring", help="fio --ioengine (io_uring, libaio)")
    p.add_argument("--iodepth", type=int, default=64)
    p.add_argument("--loops", type=int, default=3, help="passes over the file per measurement")
    p.add_argument("--reps", type=int, default=3, help="measurements per tool and cell")
    p.add_argument("--fio-extra", default="", help="more fio options, e.g. '--fixedbufs'")
    p.add_argument("--jsonl", help="file for every raw measurement")
    a = p.parse_args()

    path = os.path.join(a.dir, f"nixl-posix-cmp-{os.getpid()}.dat")
    raw = open(a.jsonl, "w") if a.jsonl else None
    rows = []
    try:
        for mode in a.modes.split(","):
            direct = mode == "direct"
            for op in a.ops.split(","):
                for bs in a.bs.split(","):
                    got = {"nixl": [], "fio": []}
                    for rep in range(a.reps):
                        # Alternate who goes first, so drift in machine load hits both.
                        order = [("nixl", run_nixl), ("fio", run_fio)]
                        if rep % 2:
                            order.reverse()
                        for tool, fn in order:
                            gbps, cmd = fn(a, path, op, bs, direct)
                            got[tool].append(gbps)
                            if raw:
                                raw.write(json.dumps({"tool": tool, "mode": mode, "op": op, "bs": bs,
                                                      "rep": rep, "gbps": gbps,
                                                      "cmd": " ".join(cmd)}) + "\n")
                    n, f = statistics.median(got["nixl"]), statistics.median(got["fio"])
                    rows.append((mode, op, bs, n, f, n / f if f else float("nan"), got))
                    print(f"# {mode:8} {op:5} {bs:>4}: nixl {n:7.3f}  fio {f:7.3f}  ratio {n / f:5.2f}",
                          file=sys.stderr, flush=True)
    finally:
        if os.path.exists(path):
            os.unlink(path)
        if raw:
            raw.close()

    print(f"| mode | op | block | nixl POSIX/{a.engine} GB/s | fio {a.fio_engine} GB/s | ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for mode, op, bs, n, f, r, _ in rows:
        print(f"| {mode} | {op} | {bs} | {n:.3f} | {f:.3f} | {r:.2f} |")
    worst = min(r for *_, r, _ in rows)
    print(f"\nminimum ratio: {worst:.2f} (size {a.size}, iodepth {a.iodepth}, {a.loops} passes per "
          f"measurement, median of {a.reps})")


if __name__ == "__main__":
    main()
