#!/usr/bin/env python3
"""Two processes through the Python API with its defaults, as in the README example.

The parent forks a target process; each creates a `nixl_agent` with default settings (UCX,
progress thread on). They swap agent metadata and the target's buffer descriptors over a pipe.
The initiator then measures, in the same run:
  - one 4 KiB WRITE handle (with a notification) reposted: transfer + check_xfer_state until
    DONE, average and 99th percentile per request;
  - one 64 MiB WRITE (without a notification, reposted) against numpy's copy of the same 64 MiB
    between two arrays of this process (np.copyto), alternating, best of --rounds.
The target verifies the bytes of the last transfer of each size and reports it.

  PYTHONPATH=<build>/python /usr/bin/python3 bench/python/two_process.py [--iters N]
"""

import argparse
import os
import sys
import time

import numpy as np

SMALL = 4096
LARGE = 64 << 20


def send(fd, data: bytes):
    os.write(fd, len(data).to_bytes(8, "little") + data)


def recv(fd) -> bytes:
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise EOFError("peer closed the pipe")
            buf += chunk
        return buf

    return exact(int.from_bytes(exact(8), "little"))


def fork_peer(child):
    """Forks a process that runs child(rd, wr) on its ends of two pipes and exits; returns the
    child's pid and this process's ends: (pid, write to the child, read from the child)."""
    p2c_r, p2c_w = os.pipe()
    c2p_r, c2p_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(p2c_w)
        os.close(c2p_r)
        try:
            child(p2c_r, c2p_w)
        finally:
            os._exit(0)
    os.close(p2c_r)
    os.close(c2p_w)
    return pid, p2c_w, c2p_r


def pattern(n, seed):
    return ((np.arange(n, dtype=np.uint64) * 131 + seed) & 0xFF).astype(np.uint8)


def target(rd, wr):
    from nixl._api import nixl_agent

    a = nixl_agent("py-target")
    small = np.zeros(SMALL, dtype=np.uint8)
    large = np.zeros(LARGE, dtype=np.uint8)
    a.register_memory([(small.ctypes.data, SMALL, 0, ""), (large.ctypes.data, LARGE, 0, "")], "DRAM")
    send(wr, a.get_agent_metadata())
    send(wr, a.get_serialized_descs(a.get_xfer_descs([(small.ctypes.data, SMALL, 0)], "DRAM")))
    send(wr, a.get_serialized_descs(a.get_xfer_descs([(large.ctypes.data, LARGE, 0)], "DRAM")))
    while True:
        cmd = recv(rd).decode()
        if cmd == "quit":
            send(wr, b"bye")
            return
        seed = int(cmd.split()[1])
        buf = small if cmd.startswith("small") else large
        ok = np.array_equal(buf, pattern(buf.size, seed))
        send(wr, b"ok" if ok else b"bad")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--iters", type=int, default=20000, help="timed 4 KiB requests")
    ap.add_argument("--rounds", type=int, default=5, help="64 MiB rounds (each: nixl, numpy)")
    args = ap.parse_args()

    pid, p2c_w, c2p_r = fork_peer(target)

    from nixl._api import nixl_agent

    a = nixl_agent("py-initiator")
    small = pattern(SMALL, 1)
    large = pattern(LARGE, 2)
    scratch = np.zeros(LARGE, dtype=np.uint8)
    a.register_memory([(small.ctypes.data, SMALL, 0, ""), (large.ctypes.data, LARGE, 0, "")], "DRAM")
    peer = a.add_remote_agent(recv(c2p_r))
    remote_small = a.deserialize_descs(recv(c2p_r))
    remote_large = a.deserialize_descs(recv(c2p_r))
    local_small = a.get_xfer_descs([(small.ctypes.data, SMALL, 0)], "DRAM")
    local_large = a.get_xfer_descs([(large.ctypes.data, LARGE, 0)], "DRAM")

    def run(h):
        state = a.transfer(h)
        while state == "PROC":
            state = a.check_xfer_state(h)
        if state != "DONE":
            sys.exit(f"transfer failed: {state}")

    hs = a.initialize_xfer("WRITE", local_small, remote_small, peer, b"small")
    for _ in range(args.iters // 10 + 1):
        run(hs)
    times = np.empty(args.iters)
    clock = time.perf_counter_ns
    for i in range(args.iters):
        t0 = clock()
        run(hs)
        times[i] = clock() - t0
    send(p2c_w, b"small 1")
    small_ok = recv(c2p_r) == b"ok"

    hl = a.initialize_xfer("WRITE", local_large, remote_large, peer)
    run(hl)
    nixl_best, copy_best = 0.0, 0.0
    for _ in range(args.rounds):
        t0 = clock()
        run(hl)
        nixl_best = max(nixl_best, LARGE / (clock() - t0))
        t0 = clock()
        np.copyto(scratch, large)
        copy_best = max(copy_best, LARGE / (clock() - t0))
    send(p2c_w, b"large 2")
    large_ok = recv(c2p_r) == b"ok"
    send(p2c_w, b"quit")
    recv(c2p_r)
    a.release_xfer_handle(hs)
    a.release_xfer_handle(hl)
    os.waitpid(pid, 0)

    us = times / 1e3
    print(f"load: {os.getloadavg()[0]:.2f}")
    print(
        f"4 KiB WRITE reposted, notification each: avg {us.mean():.2f} us, p50 {np.percentile(us, 50):.2f} us, "
        f"p99 {np.percentile(us, 99):.2f} us over {args.iters}; data {'ok' if small_ok else 'BAD'}"
    )
    print(
        f"64 MiB WRITE: nixl {nixl_best:.2f} GB/s, numpy copyto {copy_best:.2f} GB/s, "
        f"ratio {nixl_best / copy_best:.2f} (best of {args.rounds}); data {'ok' if large_ok else 'BAD'}"
    )
    return 0 if small_ok and large_ok else 1


if __name__ == "__main__":
    sys.exit(main())
