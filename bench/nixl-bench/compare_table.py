"""The table of bench/nixl-bench/compare.sh: one line per path, each figure and its anchor from
the same round, the ratio of every round (round 1 / round 2 / ...), the goal, and in how many
rounds the goal was met.

    compare_table.py OUTDIR

Reads OUTDIR/<round>/ as compare.sh leaves it; rows whose logs are missing are left out.
"""

import csv
import glob
import os
import re
import sys


def read_csv(path):
    """nixl-bench's CSV rows (UCX may write warnings to the same file: skipped)."""
    try:
        with open(path, errors="replace") as f:
            lines = [l for l in f.read().splitlines() if "UCX " not in l]
    except OSError:
        return []
    head = next((i for i, l in enumerate(lines) if l.startswith("backend,")), None)
    if head is None:
        return []
    return list(csv.DictReader(lines[head:]))


def nixl_rows(path):
    """NIXL's figures from nixl-bench's --compare_nixl table:
    {(block, batch): (GB/s, Avg Lat. us, avg post us per request)}."""
    out = {}
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return out
    at = text.find("NIXL nixlbench, same sweep")
    for line in text[at:].splitlines() if at >= 0 else []:
        w = line.split()
        if len(w) == 10 and w[0].isdigit() and w[1].isdigit() and w[3] != "-":
            out[(int(w[0]), int(w[1]))] = (float(w[3]), float(w[6]), float(w[9]))
    return out


# nixl-copy-paths' 64 MiB lines, by how they begin
COPY_LINES = {
    "memcpy, one process": "memcpy",
    "process_vm_writev, 512 KiB segments": "process_vm_writev",
    "two-process ring of 8 KiB slots": "two-process",
    "process_vm_writev, 16 KiB scattered": "scattered",
    "process_vm_writev, 64 blocks a call": "batched",
}


def copy_paths(path):
    """nixl-copy-paths' 64 MiB lines: {key of COPY_LINES: GB/s}."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                for head, key in COPY_LINES.items():
                    if line.strip().startswith(head):
                        out[key] = float(line.strip()[len(head):].split()[0])
    except OSError:
        pass
    return out


def python_row(path):
    try:
        with open(path) as f:
            m = re.search(r"64 MiB WRITE: nixl ([0-9.]+) GB/s, numpy copyto ([0-9.]+) GB/s.*data (\w+)",
                          f.read())
    except OSError:
        return None
    return (float(m.group(1)), float(m.group(2)), m.group(3) == "ok") if m else None


def read_or_empty(parse, path):
    """parse(path), or {} where the file is missing (a row that did not run)."""
    try:
        return parse(path)
    except OSError:
        return {}


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multihost_table as mh  # noqa: E402


class Line:
    def __init__(self, path, where, unit, anchor, goal, higher=True):
        self.path, self.where, self.unit, self.anchor, self.goal = path, where, unit, anchor, goal
        self.higher = higher
        self.ours, self.base, self.ratio = [], [], []

    def add(self, ours, base):
        if ours is None or not base:
            return
        self.ours.append(ours)
        self.base.append(base)
        self.ratio.append(ours / base)

    def met(self):
        ok = [r >= self.goal if self.higher else r <= self.goal for r in self.ratio]
        return f"{sum(ok)} of {len(ok)}"

    def render(self):
        cell = lambda vs: " / ".join(f"{v:.3g}" if v < 1 else f"{v:.2f}" for v in vs)
        goal = ("≥ " if self.higher else "≤ ") + f"{self.goal:.2f}"
        return (f"| {self.path} | {self.where} | {cell(self.ours)} {self.unit} | {self.anchor}: "
                f"{cell(self.base)} {self.unit} | **{' / '.join(f'{r:.2f}' if r >= 0.1 else f'{r:.3f}' for r in self.ratio)}** "
                f"| {goal} | {self.met()} |")


def cpu_lines(rounds):
    lines = []
    lat = Line("4 KiB WRITE, latency", "2 processes, UCX defaults", "µs",
               "NIXL 1.4 nixlbench (its fastest)", 1.0, higher=False)
    big = Line("64 MiB WRITE", "2 processes, UCX defaults", "GB/s", "memcpy", 0.9)
    nixl64 = Line("64 MiB WRITE", "same run", "GB/s", "NIXL 1.4 nixlbench", 1.0)
    floor = Line("64 MiB WRITE, against the transport", "same run", "GB/s",
                 "cma's own copy (process_vm_writev, 512 KiB segments, 2 processes)", 0.9)
    scat_floor = {}
    am = Line("64 MiB WRITE, no progress threads", "2 processes, --enable_pt false (both poll)",
              "GB/s", "memcpy", 0.9)
    cma = Line("64 MiB WRITE, cma calls at every size", "2 processes, shm_min_size=0", "GB/s",
               "memcpy", 0.9)
    shm = Line("64 MiB: the shared-memory ring instead", "same run (no UCX)", "GB/s", "memcpy", 0.9)
    for d in rounds:
        ours = read_csv(f"{d}/4k.csv")
        theirs = nixl_rows(f"{d}/4k.txt")
        if ours and (4096, 1) in theirs:
            lat.add(float(ours[0]["avg_lat_us"]), theirs[(4096, 1)][1])
        ours = read_csv(f"{d}/64m.csv")
        cp = copy_paths(f"{d}/copy-paths.txt")
        if ours:
            g = float(ours[0]["gbps"])
            big.add(g, float(ours[0]["baseline_gbps"]))
            t = nixl_rows(f"{d}/64m.txt").get((64 << 20, 1))
            nixl64.add(g, t[0] if t else None)
            floor.add(g, cp.get("process_vm_writev"))
        # the UCX backend copies scattered same-host DRAM 64 blocks a call (host_dram_copy=cma);
        # logs of runs before that show only a call per block
        scat_floor[d] = cp.get("batched") or cp.get("scattered")
        a = read_csv(f"{d}/64m-nopt.csv")
        if a:
            am.add(float(a[0]["gbps"]), float(a[0]["baseline_gbps"]))
        a = read_csv(f"{d}/64m-cma.csv")
        if a:
            cma.add(float(a[0]["gbps"]), float(a[0]["baseline_gbps"]))
        if cp.get("memcpy"):
            shm.add(cp.get("two-process"), cp["memcpy"])
    lines += [lat, big, nixl64, floor, am, cma, shm]
    for n in (65536, 131072):
        merged = Line(f"{n:,} x 16 KiB, one request, contiguous (one put)", "2 processes", "GB/s",
                      "NIXL 1.4 nixlbench (a put per block)", 1.0)
        scat = Line(f"{n:,} x 16 KiB, one request, scattered (64 blocks a cma call)", "2 processes",
                    "GB/s", "NIXL 1.4 nixlbench (a put per block)", 1.0)
        post = Line(f"{n:,} x 16 KiB, scattered: post per descriptor", "2 processes", "µs",
                    "NIXL's post per descriptor", 0.1, higher=False)
        cpost = Line(f"{n:,} x 16 KiB, contiguous: post per descriptor", "2 processes", "µs",
                     "NIXL's post per descriptor", 0.1, higher=False)
        mem = Line(f"{n:,} x 16 KiB, contiguous", "2 processes", "GB/s", "memcpy", 0.9)
        sfl = Line(f"{n:,} x 16 KiB, scattered, against the transport", "2 processes", "GB/s",
                   "cma's own copy (process_vm_writev of 64 scattered 16 KiB blocks a call, "
                   "64 MiB span)", 0.9)
        for d in rounds:
            t = nixl_rows(f"{d}/bulk-{n}.txt").get((16384, n))
            o = read_csv(f"{d}/bulk-{n}.csv")
            s = read_csv(f"{d}/bulk-{n}-scatter.csv")
            if o:
                merged.add(float(o[0]["gbps"]), t[0] if t else None)
                mem.add(float(o[0]["gbps"]), float(o[0]["baseline_gbps"]))
                if t:
                    cpost.add(float(o[0]["avg_post_us"]) / n, t[2] / n)
            if s:
                scat.add(float(s[0]["gbps"]), t[0] if t else None)
                sfl.add(float(s[0]["gbps"]), scat_floor.get(d))
            if s and t:
                post.add(float(s[0]["avg_post_us"]) / n, t[2] / n)
        lines += [merged, cpost, scat, post, mem, sfl]
    py = Line("Python 64 MiB WRITE", "2 processes, nixl_agent defaults", "GB/s",
              "numpy copyto", 0.9)
    pyf = Line("Python 64 MiB WRITE, against the transport", "same run", "GB/s",
               "cma's own copy (process_vm_writev, 512 KiB segments)", 0.9)
    for d in rounds:
        p = python_row(f"{d}/python.txt")
        if p:
            py.add(p[0], p[1])
            pyf.add(p[0], copy_paths(f"{d}/copy-paths.txt").get("process_vm_writev"))
    lines += [py, pyf]
    for b in (64 << 10, 4 << 20, 16 << 20):
        h = Line(f"{mh.size(b)} WRITE, one in flight", "2 sandbox hosts, TCP over veth", "GB/s",
                 "ucx_perftest ucp_put_bw -O1", 0.9)
        hn = Line(f"{mh.size(b)} WRITE, one in flight", "2 sandbox hosts", "GB/s",
                  "NIXL 1.4 nixlbench", 1.0)
        for d in rounds:
            o = read_or_empty(mh.nixl_bench, f"{d}/hosts/1-WRITE-nixl-bench.csv")
            u = read_or_empty(mh.perftest, f"{d}/hosts/1-WRITE-perftest.txt")
            t = read_or_empty(mh.nixlbench, f"{d}/hosts/1-WRITE-nixlbench.log")
            if b in o:
                h.add(o[b][0], u.get(b, (0,))[0])
                hn.add(o[b][0], t.get(b, (0,))[0])
        lines += [h, hn]
    return lines


def gpu_name(rounds):
    """The GPU the rounds ran on, from hostdev/info.txt (nvidia-smi's name), e.g. "H100 80GB HBM3"."""
    for d in rounds:
        try:
            with open(f"{d}/hostdev/info.txt") as f:
                for line in f:
                    if line.startswith("NVIDIA "):
                        return line.split(",")[0][len("NVIDIA "):].strip()
        except OSError:
            pass
    return "GPU machine"


def gpu_lines(rounds):
    lines = []
    gpu = gpu_name(rounds)
    for be in ("GDS", "GDS_MT"):
        for op in ("WRITE", "READ"):
            small = Line(f"{be} VRAM -> FILE {op}, 64 KiB - 512 KiB (lowest point)",
                         f"{gpu}, cuFile compatibility mode", "GB/s", "direct cuFile", 0.9)
            large = Line(f"{be} VRAM -> FILE {op}, 1 - 64 MiB (lowest point)",
                         "same", "GB/s", "direct cuFile", 0.9)
            for d in rounds:
                rows = read_csv(f"{d}/gds/bench/{be}-{op}".lower().replace("_", "-") + ".csv")
                for line, lo, hi in ((small, 64 << 10, 1 << 20), (large, 1 << 20, 1 << 40)):
                    pts = [r for r in rows if lo <= int(r["block_size"]) < hi
                           and float(r["baseline_gbps"] or 0) > 0]
                    if pts:
                        w = min(pts, key=lambda r: float(r["gbps"]) / float(r["baseline_gbps"]))
                        line.add(float(w["gbps"]), float(w["baseline_gbps"]))
            lines += [small, large]
    names = {"h2d-write": "DRAM -> VRAM WRITE (initiator DRAM)",
             "d2h-read": "VRAM -> DRAM READ (initiator DRAM)",
             "d2h-write": "VRAM -> DRAM WRITE (initiator VRAM)",
             "h2d-read": "DRAM -> VRAM READ (initiator VRAM)"}
    for procs in ("p1", "p2"):
        for case, label in names.items():
            line = Line(f"UCX {label}, 1 - 256 MiB (lowest point)",
                        f"{gpu}, {procs[1]} process{'es' if procs == 'p2' else ''}", "GB/s",
                        "cudaMemcpyAsync", 0.9)
            for d in rounds:
                rows = read_csv(f"{d}/hostdev/runs/{case}-{procs}-after.csv")
                pts = [r for r in rows if float(r["baseline_gbps"] or 0) > 0]
                if pts:
                    w = min(pts, key=lambda r: float(r["gbps"]) / float(r["baseline_gbps"]))
                    line.add(float(w["gbps"]), float(w["baseline_gbps"]))
            lines.append(line)
    return lines


def main():
    out = sys.argv[1]
    rounds = sorted((p for p in glob.glob(f"{out}/[0-9]*") if os.path.isdir(p)),
                    key=lambda p: int(os.path.basename(p)))
    try:
        with open(f"{out}/machine.txt") as f:
            print("\n".join(f"    {l.rstrip()}" for l in f))
    except OSError:
        pass
    for d in rounds:
        try:
            with open(f"{d}/load.txt") as f:
                print(f"    {f.readline().strip()}")
        except OSError:
            pass
    print()
    print("| path | where | nixl-cpp, per round | anchor, same round | ratio per round | goal "
          "| rounds at goal |")
    print("|---|---|---|---|---|---|---|")
    lines = cpu_lines(rounds) + gpu_lines(rounds)
    for line in lines:
        if line.ratio:
            print(line.render())


if __name__ == "__main__":
    main()
