"""One agent of a multi-host test, written against NIXL's Python API (the C++ twin is
mh_node.cpp; both speak the same line protocol, see README.md in this folder).

    mh_node.py NAME --size BYTES [--listen] [--port P] [--listen-address A] [--secret S]

Prints "READY <listen port> <buffer address>" and then answers one line per command on stdin.
"""

import argparse
import datetime
import os
import sys
import threading
import time

import numpy as np

from nixl._api import nixl_agent, nixl_agent_config

# stdout carries the node's line protocol (READY, results, BYE); the Python side's log lines,
# which the `nixl` logger prints on stdout as NIXL's does, go to stderr here (the C++ side's
# lines are on stderr already).
import logging  # noqa: E402

for _h in logging.getLogger("nixl").handlers:
    if isinstance(_h, logging.StreamHandler):
        _h.setStream(sys.stderr)

_STATUS = {
    1: "NIXL_IN_PROG",
    0: "NIXL_SUCCESS",
    -1: "NIXL_ERR_NOT_POSTED",
    -2: "NIXL_ERR_INVALID_PARAM",
    -3: "NIXL_ERR_BACKEND",
    -4: "NIXL_ERR_NOT_FOUND",
    -5: "NIXL_ERR_MISMATCH",
    -6: "NIXL_ERR_NOT_ALLOWED",
    -7: "NIXL_ERR_REPOST_ACTIVE",
    -8: "NIXL_ERR_UNKNOWN",
    -9: "NIXL_ERR_NOT_SUPPORTED",
    -10: "NIXL_ERR_REMOTE_DISCONNECT",
    -11: "NIXL_ERR_CANCELED",
}


def status_of(e: Exception) -> str:
    """NIXL's status name of a nixl*Error exception (nixlRemoteDisconnectError ->
    NIXL_ERR_REMOTE_DISCONNECT); the class name otherwise."""
    n = type(e).__name__
    if n.startswith("nixl") and n.endswith("Error"):
        core = n[4:-5]
        return "NIXL_ERR_" + "".join("_" + c if c.isupper() and i else c
                                     for i, c in enumerate(core)).upper()
    return "EXCEPTION:" + n


def pattern(seed: int, off: int, n: int) -> np.ndarray:
    """The test pattern of buffer bytes [off, off + n): (i * 7 + seed * 13) % 251, which repeats
    every 251 bytes."""
    period = ((np.arange(251, dtype=np.uint64) * 7 + seed * 13) % 251).astype(np.uint8)
    start = off % 251
    reps = (start + n + 250) // 251
    return np.tile(period, reps)[start : start + n]


class Node:
    def __init__(self, args):
        kw = {}
        if args.listen_address is not None:
            kw["listen_address"] = args.listen_address
        if args.secret is not None:
            kw["metadata_secret"] = args.secret
        if args.stall_ms is not None:
            kw["xfer_stall_timeout"] = datetime.timedelta(milliseconds=args.stall_ms)
        conf = nixl_agent_config(
            enable_prog_thread=True,
            enable_listen_thread=args.listen,
            listen_port=args.port,
            backends=[os.environ.get("NIXL_MH_BACKEND", "UCX")],
            **kw,
        )
        self.agent = nixl_agent(args.name, conf)
        self.buf = np.zeros(args.size, dtype=np.uint8)
        self.addr = self.buf.ctypes.data
        self.reg = self.agent.get_reg_descs([(self.addr, args.size, 0, "")], "DRAM")
        self.agent.register_memory(self.reg)
        self.loop_result = None
        self.loop_count = 0
        self.loop_thread = None
        self.stop_loop = False
        self.notifs = {}
        self.reqs = {}

    def port(self):
        return self.agent.listen_port if self.agent.listen_port else 0

    # ---- helpers
    def wait_md(self, name, present, ms):
        end = time.monotonic() + ms / 1000
        while time.monotonic() < end:
            if self.agent.check_remote_metadata(name) == present:
                return True
            time.sleep(0.002)
        return False

    def descs(self, base, size, n):
        return self.agent.get_xfer_descs([(base + k * size, size, 0) for k in range(n)], "DRAM")

    def run_xfer(self, op, peer, raddr, size, n, notif, timeout):
        local = self.descs(self.addr, size, n)
        remote = self.descs(raddr, size, n)
        t0 = time.monotonic()
        h = self.agent.initialize_xfer(op, local, remote, peer, notif.encode())
        try:
            self.agent.transfer(h)
            end = t0 + timeout
            while True:
                st = self.agent.agent._status(h)
                if st != 1:
                    break
                if time.monotonic() > end:
                    return "ERR timeout"
            return f"OK {_STATUS.get(st, st)} {int((time.monotonic() - t0) * 1e6)}"
        finally:
            self.agent.release_xfer_handle(h)

    def loop(self, op, peer, raddr, size):
        """Posts the same request again and again until it fails; records when it failed."""
        local = self.descs(self.addr, size, 1)
        remote = self.descs(raddr, size, 1)
        h = self.agent.initialize_xfer(op, local, remote, peer)
        count = 0
        self.loop_count = 0
        st = 0
        try:
            while not self.stop_loop:
                self.agent.transfer(h)
                while True:
                    st = self.agent.agent._status(h)
                    if st != 1:
                        break
                if st != 0:
                    break
                count += 1
                self.loop_count = count
            self.loop_result = f"OK {_STATUS.get(st, st)} {time.monotonic_ns()} {count}"
        except Exception as e:  # noqa: BLE001 (reported to the test)
            self.loop_result = f"OK {status_of(e)} {time.monotonic_ns()} {count}"
        finally:
            try:
                self.agent.release_xfer_handle(h)
            except Exception:  # noqa: BLE001
                pass

    def take_notifs(self):
        for k, v in self.agent.get_new_notifs().items():
            self.notifs.setdefault(k, []).extend(v)

    # ---- commands
    def handle(self, words):
        c = words[0]
        if c == "FILL":
            self.buf[:] = pattern(int(words[1]), 0, len(self.buf))
            return "OK"
        if c == "ZERO":
            self.buf[:] = 0
            return "OK"
        if c == "CHECK":
            seed, off, n = int(words[1]), int(words[2]), int(words[3])
            bad = np.nonzero(self.buf[off : off + n] != pattern(seed, off, n))[0]
            return "OK" if len(bad) == 0 else f"ERR mismatch at {off + int(bad[0])} ({len(bad)} bytes)"
        if c == "FETCH":
            self.agent.fetch_remote_metadata(words[1], words[2], int(words[3]))
            ms = int(words[4]) if len(words) > 4 else 10000
            return "OK" if self.wait_md(words[1], True, ms) else "ERR not loaded"
        if c == "FORGET":
            self.agent.remove_remote_agent(words[1])
            return "OK"
        if c == "SEND":
            self.agent.send_local_metadata(words[1], int(words[2]))
            return "OK"
        if c == "INVAL":
            self.agent.invalidate_local_metadata(words[1], int(words[2]))
            return "OK"
        if c == "ETCD_SEND":
            self.agent.send_local_metadata()
            return "OK"
        if c == "ETCD_FETCH":
            self.agent.fetch_remote_metadata(words[1])
            return "OK" if self.wait_md(words[1], True, 10000) else "ERR not loaded"
        if c == "ETCD_INVAL":
            self.agent.invalidate_local_metadata()
            return "OK"
        if c == "WAITMD":
            ok = self.wait_md(words[1], words[2] == "present", int(words[3]))
            return "OK" if ok else "ERR timeout"
        if c == "HASMD":
            return "OK " + ("yes" if self.agent.check_remote_metadata(words[1]) else "no")
        if c == "XFER":
            op, peer, raddr, size, n = words[1], words[2], int(words[3]), int(words[4]), int(words[5])
            notif = words[6] if len(words) > 6 else ""
            return self.run_xfer(op, peer, raddr, size, n, notif, 60.0)
        if c == "LOOP":
            op, peer, raddr, size = words[1], words[2], int(words[3]), int(words[4])
            self.loop_result = None
            self.stop_loop = False
            self.loop_thread = threading.Thread(target=self.loop, args=(op, peer, raddr, size))
            self.loop_thread.start()
            return "OK"
        if c == "MKREQ":
            rid, op, peer, raddr, size, n = words[1], words[2], words[3], int(words[4]), int(words[5]), int(words[6])
            if rid in self.reqs:
                self.agent.release_xfer_handle(self.reqs.pop(rid))
            self.reqs[rid] = self.agent.initialize_xfer(
                op, self.descs(self.addr, size, n), self.descs(raddr, size, n), peer)
            return "OK"
        if c == "POSTREQ":
            h = self.reqs[words[1]]
            try:
                self.agent.transfer(h)
                end = time.monotonic() + 60
                while True:
                    st = self.agent.agent._status(h)
                    if st != 1 or time.monotonic() > end:
                        break
            except Exception as e:  # noqa: BLE001 (the status is what the test checks)
                return f"OK {status_of(e)} {' '.join(str(e).split())}"
            return f"OK {_STATUS.get(st, st)}"
        if c == "RELREQ":
            self.agent.release_xfer_handle(self.reqs.pop(words[1]))
            return "OK"
        if c == "LOOPCOUNT":
            return f"OK {self.loop_count}"
        if c == "LOOPRESULT":
            self.loop_thread.join(int(words[1]) / 1000)
            if self.loop_thread.is_alive():
                self.stop_loop = True
                self.loop_thread.join()
                return "ERR still running"
            return self.loop_result
        if c == "NOTIFCHECK":
            peer, msg, seed, off, n, ms = words[1], words[2], int(words[3]), int(words[4]), int(words[5]), int(words[6])
            end = time.monotonic() + ms / 1000
            while True:
                self.take_notifs()
                got = self.notifs.get(peer, [])
                if msg.encode() in got:
                    got.remove(msg.encode())
                    break
                if time.monotonic() > end:
                    return "ERR no notification"
                time.sleep(0.001)
            return self.handle(["CHECK", str(seed), str(off), str(n)])
        if c == "WAITREMOTE":  # DONE, ERR (an abort notice or the peer found gone) or PROC
            peer, tag, ms = words[1], words[2], int(words[3])
            t0 = time.monotonic()
            st = self.agent.wait_remote_xfer_blocking(peer, tag.encode(), timeout=ms / 1000)
            return f"OK {st} {int((time.monotonic() - t0) * 1000)}"
        raise ValueError(f"unknown command {c}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--listen", action="store_true")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--listen-address", default=None)
    ap.add_argument("--secret", default=None)
    ap.add_argument("--stall-ms", type=int, default=None)
    args = ap.parse_args()
    try:
        node = Node(args)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {type(e).__name__}: {e}", flush=True)
        return 1
    print(f"READY {node.port()} {node.addr}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "QUIT":
            break
        try:
            out = node.handle(words)
        except Exception as e:  # noqa: BLE001 (the test reads the message)
            out = f"ERR {type(e).__name__}: {' '.join(str(e).split())}"
        print(out, flush=True)
    print("BYE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
