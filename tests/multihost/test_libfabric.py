"""The LIBFABRIC backend between sandbox hosts, over tcp;ofi_rxm pinned to the hosts' links:
data with notifications through the listener, etcd, a peer killed or its host destroyed
mid-transfer (seen within 2 s), a target learning that an initiator it never loaded died, an
agent restarting under its name, and striping over two links per host (both links carry the
bytes). Run by hand with NIXL_MH_LIBFABRIC=1."""

import os

import pytest

from conftest import MIB, connect, connect_all, lf_env, meet_through_etcd, move_points
from conftest import peer_dies_mid_transfer, restart_under_same_name
from conftest import target_keeps_initiator_that_forgot_it, target_learns_initiator_died

pytestmark = pytest.mark.skipif(
    not os.environ.get("NIXL_MH_LIBFABRIC"),
    reason="built without the LIBFABRIC backend (CMake sets NIXL_MH_LIBFABRIC=1 when it is)")

PORT = 7100


def start(sb, kind, h, size=4 * MIB, port=PORT, env=None, name=None):
    return sb.node(h, kind, name or f"lf-{h}", size=size, listen=True, port=port,
                   listen_address=sb.addr(h), env=env or lf_env())


def test_lf_data_across_hosts(sandbox, kind):
    sb = sandbox(2)
    size = 64 * MIB
    tgt = start(sb, kind, 1, size=size)
    ini = start(sb, kind, 0, size=size)
    connect(ini, tgt, sb)
    connect(tgt, ini, sb)
    move_points(ini, tgt)


def test_lf_etcd_across_hosts(sandbox, kind):
    sb = sandbox(4)
    url = sb.start_etcd(0)
    env = lf_env(NIXL_ETCD_ENDPOINTS=url, NIXL_ETCD_NAMESPACE="/mh-lf")
    nodes = [sb.node(h, kind, f"lf-{h}", size=4 * MIB, env=env) for h in (1, 2, 3)]
    meet_through_etcd(nodes)


@pytest.mark.parametrize("how", ["sigkill", "destroy-host"])
def test_lf_peer_dies_mid_transfer(sandbox, kind, how):
    sb = sandbox(3)
    size = 16 * MIB
    nodes = [start(sb, kind, h, size=size) for h in range(3)]
    peer_dies_mid_transfer(sb, nodes, how, size)


def test_lf_a_target_learns_that_an_initiator_it_never_loaded_died(sandbox, kind):
    # The target never loads the initiator's metadata: it watches it by the heartbeats it
    # receives across the link, and a wait for the initiator's next transfer ends with ERR
    # within peer_timeout_ms (1.2 s) of the kill instead of at its deadline.
    sb = sandbox(2)
    s = start(sb, kind, 0, name="lf-s")
    t = start(sb, kind, 1, name="lf-t")
    target_learns_initiator_died(sb, s, t, target_loads=False)


def test_lf_an_initiator_that_unloads_its_target_is_not_gone(sandbox, kind):
    # Dropping the target's metadata stops the heartbeats with a bye: not an end.
    sb = sandbox(2)
    target_keeps_initiator_that_forgot_it(sb, start(sb, kind, 0, name="lf-s"),
                                          start(sb, kind, 1, name="lf-t"))


@pytest.mark.parametrize("leave", ["graceful", "crash"])
def test_lf_restart_under_same_name(sandbox, kind, leave):
    sb = sandbox(3)
    nodes = [start(sb, kind, h) for h in range(3)]
    connect_all(nodes, nodes, sb)
    others, r = nodes[:2], nodes[2]
    for x in others:
        r.ok(f"FILL {x.host + 1}")
        assert x.ok(f"XFER READ {r.name} {r.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
        x.ok(f"CHECK {x.host + 1} 0 {MIB}")
    restart_under_same_name(sb, others, r, leave, lambda: start(sb, kind, 2))


def _tx_bytes(sb, host, dev):
    r = sb.run(host, ["cat", f"/sys/class/net/{dev}/statistics/tx_bytes"])
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def test_lf_two_rails_stripe(sandbox, kind):
    """Two links per host, both rails given: a 64 MiB write is striped, and each link carries
    at least a third of it."""
    sb = sandbox(2, env={"SANDBOX_LINKS": "2"})
    size = 64 * MIB
    env = lf_env("eth0,eth1")
    tgt = start(sb, kind, 1, size=size, env=env)
    ini = start(sb, kind, 0, size=size, env=env)
    connect(ini, tgt, sb)
    connect(tgt, ini, sb)
    before = {d: _tx_bytes(sb, 0, d) for d in ("eth0", "eth1")}
    ini.ok("FILL 21")
    st = ini.ok(f"XFER WRITE {tgt.name} {tgt.addr} {size} 1 striped")
    assert st[0] == "NIXL_SUCCESS", st
    tgt.ok(f"NOTIFCHECK {ini.name} striped 21 0 {size} 10000")
    sent = {d: _tx_bytes(sb, 0, d) - before[d] for d in before}
    for d, n in sent.items():
        assert n > size // 3, f"{d} carried {n} bytes of a {size}-byte striped write: {sent}"
    # READ back over both rails
    tgt.ok("FILL 22")
    ini.ok("ZERO")
    assert ini.ok(f"XFER READ {tgt.name} {tgt.addr} {size} 1")[0] == "NIXL_SUCCESS"
    ini.ok(f"CHECK 22 0 {size}")
