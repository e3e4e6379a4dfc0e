"""The LIBFABRIC backend between sandbox hosts, over tcp;ofi_rxm pinned to the hosts' links:
data with notifications through the listener, etcd, a peer killed or its host destroyed
mid-transfer (seen within 2 s), an agent restarting under its name, and striping over two links
per host (both links carry the bytes). Run by hand with NIXL_MH_LIBFABRIC=1."""

import os
import time

import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("NIXL_MH_LIBFABRIC"),
    reason="built without the LIBFABRIC backend (CMake sets NIXL_MH_LIBFABRIC=1 when it is)")

MIB = 1 << 20
PORT = 7100


def lf_env(interfaces="eth0", **extra):
    env = {"NIXL_MH_BACKEND": "LIBFABRIC", "FI_PROVIDER": "tcp;ofi_rxm",
           "NIXL_LIBFABRIC_INTERFACES": interfaces}
    env.update(extra)
    return env


def start(sb, kind, h, size=4 * MIB, port=PORT, env=None, name=None):
    return sb.node(h, kind, name or f"lf-{h}", size=size, listen=True, port=port,
                   listen_address=sb.addr(h), env=env or lf_env())


def connect(x, y, sb):
    x.ok(f"FETCH {y.name} {sb.addr(y.host)} {y.port}")


def test_lf_data_across_hosts(sandbox, kind):
    sb = sandbox(2)
    size = 64 * MIB
    tgt = start(sb, kind, 1, size=size)
    ini = start(sb, kind, 0, size=size)
    connect(ini, tgt, sb)
    connect(tgt, ini, sb)
    seed = 1
    for op in ("WRITE", "READ"):
        for dsize, n in ((4096, 1), (MIB, 1), (64 * MIB, 1), (4096, 1000), (65536, 1000)):
            seed += 1
            total = dsize * n
            src, dst = (ini, tgt) if op == "WRITE" else (tgt, ini)
            src.ok(f"FILL {seed}")
            dst.ok("ZERO")
            st = ini.ok(f"XFER {op} {tgt.name} {tgt.addr} {dsize} {n} n{seed}")
            assert st[0] == "NIXL_SUCCESS", f"{op} {dsize}x{n}: {st}"
            if op == "READ":
                ini.ok(f"CHECK {seed} 0 {total}")
            # the notification is there only after the data: the target checks at once
            tgt.ok(f"NOTIFCHECK {ini.name} n{seed} {seed} 0 {total} 10000")


def test_lf_etcd_across_hosts(sandbox, kind):
    sb = sandbox(4)
    url = sb.start_etcd(0)
    env = lf_env(NIXL_ETCD_ENDPOINTS=url, NIXL_ETCD_NAMESPACE="/mh-lf")
    nodes = [sb.node(h, kind, f"lf-{h}", size=4 * MIB, env=env) for h in (1, 2, 3)]
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
    a.ok("ETCD_INVAL")
    for x in (b, c):
        x.ok(f"WAITMD {a.name} absent 5000")


@pytest.mark.parametrize("how", ["sigkill", "destroy-host"])
def test_lf_peer_dies_mid_transfer(sandbox, kind, how):
    sb = sandbox(3)
    size = 16 * MIB
    nodes = [start(sb, kind, h, size=size) for h in range(3)]
    a, b, t = nodes
    for x in (a, b):
        for y in nodes:
            if x is not y:
                connect(x, y, sb)
    for x in (a, b):
        x.ok(f"LOOP WRITE {t.name} {t.addr} {size}")
    for x in (a, b):
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
        assert int(count) > 0
    for src, dst, seed in ((a, b, 11), (b, a, 12)):
        src.ok(f"FILL {seed}")
        st = src.ok(f"XFER WRITE {dst.name} {dst.addr} {MIB} 4 after-{seed}")
        assert st[0] == "NIXL_SUCCESS"
        dst.ok(f"NOTIFCHECK {src.name} after-{seed} {seed} 0 {4 * MIB} 10000")
    r = a.cmd(f"XFER WRITE {t.name} {t.addr} 4096 1")
    assert r.startswith("ERR") or "NIXL_ERR" in r, r


@pytest.mark.parametrize("leave", ["graceful", "crash"])
def test_lf_restart_under_same_name(sandbox, kind, leave):
    sb = sandbox(3)
    nodes = [start(sb, kind, h) for h in range(3)]
    for x in nodes:
        for y in nodes:
            if x is not y:
                connect(x, y, sb)
    others, r = nodes[:2], nodes[2]
    for x in others:
        r.ok(f"FILL {x.host + 1}")
        assert x.ok(f"XFER READ {r.name} {r.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
        x.ok(f"CHECK {x.host + 1} 0 {MIB}")
        x.ok(f"MKREQ old WRITE {r.name} {r.addr} {MIB} 1")
    if leave == "graceful":
        for x in others:
            r.ok(f"INVAL {sb.addr(x.host)} {PORT}")
        for x in others:
            x.ok(f"WAITMD {r.name} absent 10000")
        r.quit()
    else:
        r.kill()
        for x in others:
            st = x.ok("POSTREQ old")[0]
            assert st in ("NIXL_ERR_REMOTE_DISCONNECT", "NIXL_ERR_NOT_FOUND"), st
            x.ok(f"WAITMD {r.name} absent 10000")
    r2 = start(sb, kind, 2)
    r2.ok("FILL 99")
    for x in others:
        connect(x, r2, sb)
        connect(r2, x, sb)
    for x in others:
        assert x.ok("POSTREQ old")[0] == "NIXL_ERR_NOT_FOUND"
        x.ok("RELREQ old")
        assert x.ok(f"XFER READ {r2.name} {r2.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
        x.ok(f"CHECK 99 0 {MIB}")
    for x in others:  # after every READ: the WRITEs change r2's buffer
        x.ok(f"FILL {x.host + 50}")
        assert x.ok(f"XFER WRITE {r2.name} {r2.addr} {MIB} 1 hi{x.host}")[0] == "NIXL_SUCCESS"
        r2.ok(f"NOTIFCHECK {x.name} hi{x.host} {x.host + 50} 0 {MIB} 10000")
        assert r2.ok(f"XFER READ {x.name} {x.addr} {MIB} 1")[0] == "NIXL_SUCCESS"


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
