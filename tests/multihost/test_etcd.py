"""etcd across hosts: a real etcd on host 0, agents on hosts 1-3 meet through
NIXL_ETCD_ENDPOINTS (no listener), move data, and see invalidation through the watch on every
other host: an agent that unpublishes, and one that dies (its lease expires)."""

import time

from conftest import MIB, meet_through_etcd


def test_etcd_across_hosts(sandbox, kind):
    sb = sandbox(4)
    url = sb.start_etcd(0)
    env = {"NIXL_ETCD_ENDPOINTS": url, "NIXL_ETCD_NAMESPACE": "/mh"}
    nodes = [sb.node(h, kind, f"mh-{h}", size=4 * MIB, env=env) for h in (1, 2, 3)]
    meet_through_etcd(nodes)  # ends with a unpublished: b and c dropped it
    _, b, c = nodes

    # c dies without a word: its lease expires (TTL 10 s) and b drops it
    t = c.kill()
    b.ok(f"WAITMD {c.name} absent 20000", timeout=30)
    assert time.monotonic() - t < 20
