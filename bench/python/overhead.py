#!/usr/bin/env python3
"""Per-request overhead of the Python API against the C++ path.

Runs the same cycles as overhead.cpp (loopback DRAM over UCX, 64 bytes by default):
  initialize_transfer_check_release   initialize_xfer + transfer + check_xfer_state + release
  make_prepped_transfer_check_release make_prepped_xfer + transfer + check_xfer_state + release
  transfer_check_repost               transfer + check_xfer_state on one handle
and, when the C++ program is given (or found next to the module in the build tree), runs it
and prints both columns and the difference per request.

  PYTHONPATH=<build>/python python3 bench/python/overhead.py [--iters N] [--bytes B]
      [--cpp <build>/python/nixl_py_overhead_cpp]
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--bytes", type=int, default=64)
    ap.add_argument("--cpp", default=None, help="path of nixl_py_overhead_cpp")
    args = ap.parse_args()

    from nixl._api import nixl_agent

    a = nixl_agent("bench-py")
    src = np.ones(args.bytes, dtype=np.uint8)
    dst = np.zeros(args.bytes, dtype=np.uint8)
    a.register_memory([(src.ctypes.data, args.bytes, 0, ""), (dst.ctypes.data, args.bytes, 0, "")],
                      "DRAM")
    local = a.get_xfer_descs([(src.ctypes.data, args.bytes, 0)], "DRAM")
    remote = a.get_xfer_descs([(dst.ctypes.data, args.bytes, 0)], "DRAM")

    def wait(h, state):
        while state == "PROC":
            state = a.check_xfer_state(h)
        if state != "DONE":
            sys.exit(f"transfer failed: {state}")

    def run(name, fn):
        for _ in range(args.iters // 10 + 1):
            fn()
        t0 = time.perf_counter_ns()
        for _ in range(args.iters):
            fn()
        return name, (time.perf_counter_ns() - t0) / args.iters

    def create_cycle():
        h = a.initialize_xfer("WRITE", local, remote, a.name)
        wait(h, a.transfer(h))
        h.release()

    lp = a.prep_xfer_dlist("", local)
    rp = a.prep_xfer_dlist(a.name, remote)

    def prepped_cycle():
        h = a.make_prepped_xfer("WRITE", lp, [0], rp, [0])
        wait(h, a.transfer(h))
        h.release()

    held = a.initialize_xfer("WRITE", local, remote, a.name)

    def repost_cycle():
        wait(held, a.transfer(held))

    py = dict([run("initialize_transfer_check_release", create_cycle),
               run("make_prepped_transfer_check_release", prepped_cycle),
               run("transfer_check_repost", repost_cycle)])

    cpp_path = args.cpp
    if cpp_path is None:
        import nixl

        guess = os.path.join(os.path.dirname(os.path.dirname(nixl.__file__)), "nixl_py_overhead_cpp")
        cpp_path = guess if os.path.exists(guess) else None
    cpp = {}
    if cpp_path:
        out = subprocess.run([cpp_path, str(args.iters), str(args.bytes)], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            k, v = line.split()
            cpp[k] = float(v)

    print(f"{'case':38s} {'python ns':>10s} {'c++ ns':>10s} {'overhead ns':>12s}")
    for k, v in py.items():
        c = cpp.get(k)
        cs = f"{c:10.0f}" if c is not None else f"{'-':>10s}"
        ds = f"{v - c:12.0f}" if c is not None else f"{'-':>12s}"
        print(f"{k:38s} {v:10.0f} {cs} {ds}")


if __name__ == "__main__":
    main()
