"""The metadata listener across hosts: its address comes from the program (C++ field, Python
keyword) or NIXL_LISTEN_ADDRESS; the default stays loopback; "0.0.0.0" and "::" bind every
address; a bad value fails agent creation clearly. Fetch, send and invalidate between hosts."""

import pytest


def test_fetch_send_invalidate(sandbox, kind):
    sb = sandbox(3)
    a = sb.node(0, kind, "mh-a", listen=True, listen_address=sb.addr(0))
    b = sb.node(1, kind, "mh-b", listen=True, env={"NIXL_LISTEN_ADDRESS": sb.addr(1)})
    c = sb.node(2, kind, "mh-c", listen=True, listen_address="0.0.0.0")
    d = sb.node(2, kind, "mh-d", listen=True, listen_address="::")
    for x, y in ((a, b), (b, c), (c, a), (a, d)):
        x.ok(f"FETCH {y.name} {sb.addr(y.host)} {y.port}")
    # send: b pushes its metadata to a's listener
    b.ok(f"SEND {sb.addr(0)} {a.port}")
    a.ok("WAITMD mh-b present 10000")
    # invalidate: a tells b and c to drop it
    for y in (b, c):
        a.ok(f"SEND {sb.addr(y.host)} {y.port}")
        y.ok("WAITMD mh-a present 10000")
        a.ok(f"INVAL {sb.addr(y.host)} {y.port}")
        y.ok("WAITMD mh-a absent 10000")


def test_default_is_loopback(sandbox, kind):
    sb = sandbox(2)
    t = sb.node(1, kind, "mh-t", listen=True)  # no address anywhere: 127.0.0.1
    a = sb.node(0, kind, "mh-a")
    r = a.cmd(f"FETCH mh-t {sb.addr(1)} {t.port} 2000")
    assert r.startswith("ERR"), r
    # and on its own host it answers on loopback
    b = sb.node(1, kind, "mh-b")
    b.ok(f"FETCH mh-t 127.0.0.1 {t.port}")


@pytest.mark.parametrize("bad", ["not-an-address", "10.77.0.300", "host.example"])
def test_bad_address_fails_at_creation(sandbox, kind, bad):
    sb = sandbox(2)
    n = sb.node(0, kind, "mh-bad", listen=True, listen_address=bad, expect_ready=False)
    assert n.first.startswith("FAILED"), n.first
    assert bad in n.first and "listen_address" in n.first, n.first
    n = sb.node(0, kind, "mh-bad-env", listen=True, env={"NIXL_LISTEN_ADDRESS": bad},
                expect_ready=False)
    assert n.first.startswith("FAILED") and bad in n.first, n.first
