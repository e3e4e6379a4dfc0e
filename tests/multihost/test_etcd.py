"""etcd across hosts: a real etcd on host 0, agents on hosts 1-3 meet through
NIXL_ETCD_ENDPOINTS (no listener), move data, and see invalidation through the watch on every
other host: an agent that unpublishes, and one that dies (its lease expires)."""

import time

MIB = 1 << 20


def test_etcd_across_hosts(sandbox, kind):
    sb = sandbox(4)
    url = sb.start_etcd(0)
    env = {"NIXL_ETCD_ENDPOINTS": url, "NIXL_ETCD_NAMESPACE": "/mh"}
    nodes = [sb.node(h, kind, f"mh-{h}", size=4 * MIB, env=env) for h in (1, 2, 3)]
    for x in nodes:
        x.ok("ETCD_SEND")
    for x in nodes:
        for y in nodes:
            if x is not y:
                x.ok(f"ETCD_FETCH {y.name}")
    a, b, c = nodes
    a.ok("FILL 5")
    assert a.ok(f"XFER WRITE {b.name} {b.addr} {MIB} 4 via-etcd")[0] == "NIXL_SUCCESS"
    b.ok(f"NOTIFCHECK {a.name} via-etcd 5 0 {4 * MIB} 10000")
    assert c.ok(f"XFER READ {b.name} {b.addr} {MIB} 4")[0] == "NIXL_SUCCESS"
    c.ok(f"CHECK 5 0 {4 * MIB}")

    # a unpublishes: the watch drops it on b and c
    a.ok("ETCD_INVAL")
    for x in (b, c):
        x.ok(f"WAITMD {a.name} absent 5000")

    # c dies without a word: its lease expires (TTL 10 s) and b drops it
    t = c.kill()
    b.ok(f"WAITMD {c.name} absent 20000", timeout=30)
    assert time.monotonic() - t < 20
