#!/usr/bin/env python3
"""Many transfers awaited at once from asyncio: what the waiting costs, by how the loop looks.

Two agents in one process (UCX, default settings, progress threads on); each round posts K
WRITEs of SIZE bytes (K blocks of one buffer) and waits for all of them, three ways in turn:
  - peek: `await asyncio.gather(agent.wait_xfer(h) ...)`: the event fd, then
    `peek_xfer_state` of each transfer after a wake-up (no progress call while in flight);
  - poll: the same fd loop, but each wake-up asks with a zero-timeout `wait_xfer_blocking`
    (a progress call per transfer: how `wait_xfer` looked before it peeked);
  - busy: `check_xfer_state` of each transfer in a loop until all are done (NIXL's way).
Per mode it prints the median round time (posts and wait) and time of the posts, and from the
end of the posts the CPU time of the waiting thread (`time.thread_time`) and of the whole process
(progress threads included), per transfer.
`UCX_TLS=tcp` keeps the puts in flight after the post (same-host shared memory or cma often
completes them inside it).

  UCX_TLS=tcp PYTHONPATH=<build>/python /usr/bin/python3 bench/python/wait_many.py
      [--transfers 100] [--size 4096] [--rounds 200]
"""

import argparse
import asyncio
import os
import statistics
import time

import numpy as np

from nixl._api import nixl_agent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfers", type=int, default=100)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    k, n = args.transfers, args.size

    ini = nixl_agent(f"wm-ini-{os.getpid()}")
    tgt = nixl_agent(f"wm-tgt-{os.getpid()}")
    src = np.random.default_rng(1).integers(0, 256, k * n, dtype=np.uint8)
    dst = np.zeros(k * n, dtype=np.uint8)
    ini_reg = ini.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    tgt_reg = tgt.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    ini.add_remote_agent(tgt.get_agent_metadata())
    # one block a transfer, made from prepared lists (as KV-cache connectors do)
    blocks = [(src.ctypes.data + i * n, n, 0) for i in range(k)]
    local = ini.prep_xfer_dlist("NIXL_INIT_AGENT", blocks, "DRAM")
    blocks = [(dst.ctypes.data + i * n, n, 0) for i in range(k)]
    remote = ini.prep_xfer_dlist(tgt.name, blocks, "DRAM")
    handles = [ini.make_prepped_xfer("WRITE", local, [i], remote, [i]) for i in range(k)]

    def post_all():
        for h in handles:
            assert ini.transfer(h) in ("DONE", "PROC")

    async def by_peek():
        states = await asyncio.gather(*(ini.wait_xfer(h, timeout=30.0) for h in handles))
        assert states == ["DONE"] * k, states

    async def by_poll():
        def probe(h):
            def ended():
                s = ini.wait_xfer_blocking(h, timeout=0.0)
                return None if s == "PROC" else s

            return ini._events.until(ended, 30.0)

        states = await asyncio.gather(*(probe(h) for h in handles))
        assert states == ["DONE"] * k, states

    async def by_busy():
        left = list(handles)
        while left:
            left = [h for h in left if ini.check_xfer_state(h) == "PROC"]
            await asyncio.sleep(0)  # as an event loop that also serves others

    modes = {"peek": by_peek, "poll": by_poll, "busy": by_busy}
    results = {m: ([], [], [], []) for m in modes}

    async def run_all():
        for m, fn in modes.items():  # one warm-up round each
            post_all()
            await fn()
        for _ in range(args.rounds):
            for m, fn in modes.items():
                posting, wall, thread_cpu, proc_cpu = results[m]
                t0 = time.perf_counter()
                post_all()
                t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
                await fn()
                posting.append(t1 - t0)
                wall.append(time.perf_counter() - t0)
                thread_cpu.append(time.thread_time() - c1)
                proc_cpu.append(time.process_time() - p1)

    asyncio.run(run_all())
    assert np.array_equal(src, dst)

    print(f"# {k} transfers of {n} B in flight per round, {args.rounds} rounds per mode, "
          f"UCX_TLS={os.environ.get('UCX_TLS', '(default)')}")
    print("per transfer, medians of the rounds: round = post of all + wait for all; the CPU")
    print("columns count from the end of the posts (the waiting thread; the whole process)")
    print("mode  round_us  post_us  round_us/xfer  wait_thread_cpu_us/xfer  process_cpu_us/xfer")
    for m, (posting, wall, thread_cpu, proc_cpu) in results.items():
        w = statistics.median(wall) * 1e6
        print(f"{m:5} {w:9.1f} {statistics.median(posting) * 1e6:8.1f} {w / k:14.2f} "
              f"{statistics.median(thread_cpu) * 1e6 / k:24.2f} "
              f"{statistics.median(proc_cpu) * 1e6 / k:20.2f}")

    for h in handles:
        h.release()
    handles.clear()
    ini.release_dlist_handle(local)
    ini.release_dlist_handle(remote)
    ini.deregister_memory(ini_reg)
    tgt.deregister_memory(tgt_reg)
    ini = None  # first: its endpoints close while the target still answers
    tgt = None


if __name__ == "__main__":
    main()
