"""Failure across hosts: the target's agent process is SIGKILLed (or its whole host destroyed)
while two initiators on two other hosts are writing to it. Each initiator's request must end
with NIXL_ERR_REMOTE_DISCONNECT within 2 s, without hang or crash, and requests between the
live hosts must keep working."""

import time

import pytest

MIB = 1 << 20


def connect(a, b, sb):
    """a fetches b's metadata from b's listener (b listens on its host address)."""
    a.ok(f"FETCH {b.name} {sb.addr(b.host)} {b.port}")


@pytest.mark.parametrize("how", ["sigkill", "destroy-host"])
def test_peer_dies_mid_transfer(sandbox, kind, how):
    sb = sandbox(3)
    size = 16 * MIB
    nodes = [sb.node(h, kind, f"mh-{h}", size=size, listen=True, listen_address=sb.addr(h))
             for h in range(3)]
    a, b, t = nodes
    for x in (a, b):
        for y in nodes:
            if x is not y:
                connect(x, y, sb)
    for x in (a, b):
        x.ok(f"LOOP WRITE {t.name} {t.addr} {size}")
    for x in (a, b):  # both have moved data and are now in the middle of 16 MiB writes
        end = time.monotonic() + 30
        while int(x.ok("LOOPCOUNT")[0]) < 2:
            assert time.monotonic() < end, f"{x.name}: no transfer completed in 30 s"
            time.sleep(0.01)
    t_kill = t.kill() if how == "sigkill" else sb.destroy(t.host)
    for x in (a, b):
        st, t_err_ns, count = x.ok("LOOPRESULT 10000")
        assert st == "NIXL_ERR_REMOTE_DISCONNECT", f"{x.name}: {st}"
        delay = int(t_err_ns) / 1e9 - t_kill
        assert delay < 2.0, f"{x.name} saw the failure after {delay:.2f} s"
        assert int(count) > 0, f"{x.name}: no transfer completed before the failure"
    # the live hosts still talk to each other, both ways
    for src, dst, seed in ((a, b, 11), (b, a, 12)):
        src.ok(f"FILL {seed}")
        st = src.ok(f"XFER WRITE {dst.name} {dst.addr} {MIB} 4 after-{seed}")
        assert st[0] == "NIXL_SUCCESS"
        dst.ok(f"NOTIFCHECK {src.name} after-{seed} {seed} 0 {4 * MIB} 10000")
    # a new request to the dead peer fails cleanly as well
    r = a.cmd(f"XFER WRITE {t.name} {t.addr} 4096 1")
    assert r.startswith("ERR") or "NIXL_ERR" in r, r
