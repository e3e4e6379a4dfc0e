#!/usr/bin/env python3
"""Many descriptors in one request through the Python API, two processes, as vLLM posts them.

The parent forks a target process; each creates a `nixl_agent` with default settings (UCX,
progress thread on). The target registers one buffer and sends its agent metadata and the
serialized descriptors of N blocks (an Nx3 numpy array: addr, len, dev). The initiator times,
per round:
  - prep: prep_xfer_dlist of its N local blocks and of the target's N blocks (once per run);
  - make: make_prepped_xfer("WRITE", local, indices, remote, indices) of all N blocks;
  - post: transfer() of that handle;
  - tx: from transfer() until check_xfer_state says DONE;
and the bytes per second of the whole request; then releases the handle. `--scatter` leaves a
block's size of room after every block on both sides, so that no two are contiguous (else the
library may merge runs of blocks into one put). The target checks the bytes of the last round.

  PYTHONPATH=<build>/python /usr/bin/python3 bench/python/bulk.py [--blocks 65536]
      [--block 16384] [--rounds 5] [--scatter] [--indices list|array]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from two_process import fork_peer, recv, send  # noqa: E402


def layout(base, blocks, block, scatter):
    stride = 2 * block if scatter else block
    d = np.empty((blocks, 3), dtype=np.uint64)
    d[:, 0] = base + np.arange(blocks, dtype=np.uint64) * stride
    d[:, 1] = block
    d[:, 2] = 0
    return d


def target(rd, wr, args, span):
    from nixl._api import nixl_agent

    a = nixl_agent("bulk-target")
    buf = np.zeros(span, dtype=np.uint8)
    a.register_memory([(buf.ctypes.data, span, 0, "")], "DRAM")
    send(wr, a.get_agent_metadata())
    descs = a.get_xfer_descs(layout(buf.ctypes.data, args.blocks, args.block, args.scatter), "DRAM")
    send(wr, a.get_serialized_descs(descs))
    recv(rd)  # the initiator is done
    d = layout(0, args.blocks, args.block, args.scatter)
    ok = all(np.all(buf[int(o):int(o) + args.block] == (i % 251) + 1)
             for i, o in enumerate(d[:, 0]))
    send(wr, b"ok" if ok else b"bad")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--blocks", type=int, default=65536)
    ap.add_argument("--block", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scatter", action="store_true")
    ap.add_argument("--indices", choices=("list", "array"), default="list",
                    help="indices as a list of ints (default) or a 1-D int64 numpy array")
    args = ap.parse_args()
    span = args.blocks * args.block * (2 if args.scatter else 1)

    pid, p2c_w, c2p_r = fork_peer(lambda rd, wr: target(rd, wr, args, span))

    from nixl._api import nixl_agent

    a = nixl_agent("bulk-initiator")
    src = np.zeros(span, dtype=np.uint8)
    d = layout(0, args.blocks, args.block, args.scatter)
    for i, o in enumerate(d[:, 0]):
        src[int(o):int(o) + args.block] = (i % 251) + 1
    a.register_memory([(src.ctypes.data, span, 0, "")], "DRAM")
    peer = a.add_remote_agent(recv(c2p_r))
    remote_descs = a.deserialize_descs(recv(c2p_r))
    clock = time.perf_counter_ns

    t0 = clock()
    local = a.prep_xfer_dlist("", layout(src.ctypes.data, args.blocks, args.block, args.scatter),
                              "DRAM")
    remote = a.prep_xfer_dlist(peer, remote_descs)
    prep_us = (clock() - t0) / 1e3
    idx = list(range(args.blocks)) if args.indices == "list" else np.arange(args.blocks)
    rows = []
    for _ in range(args.rounds + 1):  # the first round warms up
        t0 = clock()
        h = a.make_prepped_xfer("WRITE", local, idx, remote, idx)
        t1 = clock()
        state = a.transfer(h)
        t2 = clock()
        while state == "PROC":
            state = a.check_xfer_state(h)
        t3 = clock()
        if state != "DONE":
            sys.exit(f"transfer failed: {state}")
        a.release_xfer_handle(h)
        rows.append(((t1 - t0) / 1e3, (t2 - t1) / 1e3, (t3 - t1) / 1e3))
    send(p2c_w, b"check")
    ok = recv(c2p_r) == b"ok"
    os.waitpid(pid, 0)
    rows = np.array(rows[1:])
    nbytes = args.blocks * args.block
    best = rows[:, 2].min()
    print(f"load: {os.getloadavg()[0]:.2f}")
    print(f"{args.blocks} x {args.block} B WRITE, {'scattered' if args.scatter else 'contiguous'}, "
          f"best of {args.rounds}: {nbytes / (best * 1e3):.2f} GB/s; "
          f"prep (both lists, once) {prep_us / 1e3:.1f} ms, "
          f"make ({args.indices} indices) {np.median(rows[:, 0]) / 1e3:.2f} ms ({np.median(rows[:, 0]) * 1e3 / args.blocks:.1f} ns a descriptor), "
          f"post {np.median(rows[:, 1]):.1f} us, tx {np.median(rows[:, 2]) / 1e3:.1f} ms (medians); "
          f"data {'ok' if ok else 'BAD'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
