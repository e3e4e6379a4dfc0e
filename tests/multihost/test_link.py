"""A link that goes down and comes back (a cable pulled and put back): the target host's
interface is set down inside its sandbox host while the initiator writes to it in a loop with a
1 s stall timeout. The request in flight ends with NIXL_ERR_XFER_STALLED within 1.2x of the
timeout after the link went down; once the link is up, requests to the same peer succeed again
(data and notification checked), without loading its metadata again."""

import os
import re
import time

import pytest

from conftest import MIB, connect, lf_env

STALL_MS = 1000


def xfer(node, line):
    """The status of an XFER: the C++ node answers "OK <status> <us>"; the Python node answers
    "ERR <exception>: ..." when the status check raised (nixlXferStalledError, ...)."""
    r = node.cmd(line)
    if r.startswith("OK"):
        return r.split()[1]
    m = re.search(r"NIXL_ERR_[A-Z_]+", r)
    if m:
        return m.group(0)
    raise AssertionError(f"{node.name}: '{line}' -> {r}")


@pytest.mark.parametrize("backend", ["UCX", "LIBFABRIC"])
def test_link_down_and_back(sandbox, kind, backend):
    if backend == "LIBFABRIC" and not os.environ.get("NIXL_MH_LIBFABRIC"):
        pytest.skip("built without the LIBFABRIC backend")
    env = lf_env() if backend == "LIBFABRIC" else None
    sb = sandbox(2)
    size = 16 * MIB
    a = sb.node(0, kind, "ld-a", size=size, listen=True, listen_address=sb.addr(0),
                stall_ms=STALL_MS, env=env)
    t = sb.node(1, kind, "ld-t", size=size, listen=True, listen_address=sb.addr(1), env=env)
    connect(a, t, sb)
    a.ok(f"LOOP WRITE {t.name} {t.addr} {size}")
    end = time.monotonic() + 30
    while int(a.ok("LOOPCOUNT")[0]) < 2:
        assert time.monotonic() < end, "no transfer completed in 30 s"
        time.sleep(0.01)
    t_down = sb.link(t.host, up=False)
    try:
        st, t_err_ns, count = a.ok("LOOPRESULT 10000")
        delay = int(t_err_ns) / 1e9 - t_down
        assert int(count) >= 2
        if st == "NIXL_ERR_REMOTE_DISCONNECT":
            # LIBFABRIC's heartbeats (peer_timeout_ms 1200) found the peer dead first
            assert backend == "LIBFABRIC", st
            assert delay < 2.0, f"the failure was reported {delay:.2f} s after"
            dead = True
        else:
            assert st == "NIXL_ERR_XFER_STALLED", st
            assert delay < 1.2 * STALL_MS / 1000, f"the stall was reported {delay:.2f} s after"
            dead = False
            # down for a while longer: a new request stalls as well, and says so in time
            t0 = time.monotonic()
            st = xfer(a, f"XFER WRITE {t.name} {t.addr} {MIB} 1")
            assert st in ("NIXL_ERR_XFER_STALLED", "NIXL_ERR_REMOTE_DISCONNECT"), st
            dead = st == "NIXL_ERR_REMOTE_DISCONNECT"
            assert time.monotonic() - t0 < 1.2 * STALL_MS / 1000 + 0.5
    finally:
        sb.link(t.host, up=True)
    if dead:
        # a peer found dead was dropped: its metadata loads again, a new connection
        connect(a, t, sb)
    # back up: TCP retransmits after its backoff, so the first requests may stall still; one
    # succeeds within 30 s, and then every byte and the notification arrive
    end = time.monotonic() + 30
    while True:
        a.ok("FILL 9")
        t.ok("ZERO")
        st = xfer(a, f"XFER WRITE {t.name} {t.addr} {MIB} 4 back-9")
        if st == "NIXL_SUCCESS":
            break
        assert st in ("NIXL_ERR_XFER_STALLED", "NIXL_ERR_REMOTE_DISCONNECT"), st
        assert time.monotonic() < end, "no request succeeded within 30 s of the link coming up"
    t.ok(f"NOTIFCHECK {a.name} back-9 9 0 {4 * MIB} 10000")
    for seed in (10, 11):  # and the next ones at once
        a.ok(f"FILL {seed}")
        st = xfer(a, f"XFER WRITE {t.name} {t.addr} {MIB} 4 next-{seed}")
        assert st == "NIXL_SUCCESS", st
        t.ok(f"NOTIFCHECK {a.name} next-{seed} {seed} 0 {4 * MIB} 10000")
