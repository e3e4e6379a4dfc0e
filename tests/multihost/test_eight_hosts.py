"""Eight hosts and one etcd: an agent (the C++ node) on each of 8 sandbox hosts, etcd on host 0.
Every agent registers memory and publishes its metadata to etcd; every ordered pair (56) WRITEs
with a notification and READs back at once, every byte checked. Then one agent invalidates
itself and leaves (the others see it gone), one is SIGKILLed (the others, each moving data to
it, see NIXL_ERR_REMOTE_DISCONNECT within 2 s and drop it) and one restarts under the same name
(a request built against the old generation fails with NIXL_ERR_NOT_FOUND; after reloading, the
six that are left do the all-pairs round again).

It runs as its own ctest test, multihost.eight_hosts (NIXL_MH_EIGHT_HOSTS=1, a time limit of its
own); the directory run skips it."""

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import NodeError

MIB = 1 << 20
HOSTS = 8
SLOT = MIB  # bytes per ordered pair
DESCS = 4  # descriptors per pair (256 KiB each)
SIZE = 3 * HOSTS * SLOT  # the node's three rows of slots (see MESH in mh_node.cpp)
LEAVER, VICTIM, RESTARTER = 5, 6, 7
DETECT_S = 2.0

pytestmark = pytest.mark.skipif(
    os.environ.get("NIXL_MH_EIGHT_HOSTS") != "1",
    reason="runs as its own ctest test (multihost.eight_hosts); set NIXL_MH_EIGHT_HOSTS=1")


def each(nodes, lines, timeout=90):
    """Sends every node its command lines at once, then collects the answers: the hosts work
    concurrently. lines(node) -> a line or a list of lines; returns {host: [answer words]}."""
    sent = {}
    for n in nodes:
        ls = lines(n)
        ls = [ls] if isinstance(ls, str) else ls
        for line in ls:
            n.send(line)
        sent[n.host] = ls
    out = {}
    for n in nodes:
        for line in sent[n.host]:
            r = n.read_line(timeout)
            if not r.startswith("OK"):
                raise NodeError(f"{n.name} on host {n.host}: '{line[:120]}' -> {r}")
            out[n.host] = r.split()[1:]
    return out


def mesh(nodes):
    """Every ordered pair of `nodes`: WRITE with a notification, READ back, data checked on
    both sides. Returns the slowest WRITE and READ phase of a node, in seconds."""
    each(nodes, lambda n: "ZERO")  # all cleared before anybody writes
    res = each(nodes, lambda n: f"MESH {n.host} {SLOT} {DESCS} " + " ".join(
        f"{p.host}:{p.name}:{p.addr}" for p in nodes if p is not n), timeout=120)
    each(nodes, lambda n: f"MESHCHECK 10000 {n.host} {SLOT} {DESCS} " + " ".join(
        f"{p.host}:{p.name}" for p in nodes if p is not n))
    return (max(int(w) for w, _ in res.values()) / 1e6,
            max(int(r) for _, r in res.values()) / 1e6)


def test_eight_hosts(sandbox):
    node_bin = os.environ.get("NIXL_MH_NODE", "")
    if not (node_bin and os.access(node_bin, os.X_OK)):
        pytest.skip("the C++ node (nixl_mh_node) is not built: NIXL_MH_NODE unset")
    t_start = time.monotonic()
    sb = sandbox(HOSTS)
    url = sb.start_etcd(0)
    env = {"NIXL_ETCD_ENDPOINTS": url, "NIXL_ETCD_NAMESPACE": "/mh8"}

    def start(h):
        return sb.node(h, "cpp", f"mh8-{h}", size=SIZE, env=env)

    with ThreadPoolExecutor(HOSTS) as pool:
        nodes = list(pool.map(start, range(HOSTS)))
    each(nodes, lambda n: "ETCD_SEND")
    each(nodes, lambda n: [f"ETCD_FETCH {p.name}" for p in nodes if p is not n])
    t_up = time.monotonic()
    w1, r1 = mesh(nodes)
    t_mesh = time.monotonic()

    # one agent unpublishes itself and leaves: every other host sees it gone
    leaver = nodes[LEAVER]
    leaver.ok("ETCD_INVAL")
    rest = [n for n in nodes if n is not leaver]
    each(rest, lambda n: f"WAITMD {leaver.name} absent 5000")
    leaver.quit()

    victim, restarter = nodes[VICTIM], nodes[RESTARTER]
    live = [n for n in rest if n is not victim]  # six, the restarter among them
    keep = [n for n in live if n is not restarter]
    each(keep, lambda n: f"MKREQ old WRITE {restarter.name} {restarter.addr} {MIB} 1")

    # one is SIGKILLed while every live host writes to it
    each(live, lambda n: f"PROBE WRITE {victim.name} {victim.addr} 4096 1000")
    for n in live:
        end = time.monotonic() + 30
        while int(n.ok("LOOPCOUNT")[0]) < 2:
            assert time.monotonic() < end, f"{n.name}: no write to {victim.name} in 30 s"
            time.sleep(0.01)
    t_kill = victim.kill()
    delays = {}
    for n in live:
        st, t_err_ns, count = n.ok("LOOPRESULT 10000")
        delays[n.name] = int(t_err_ns) / 1e9 - t_kill
        assert st == "NIXL_ERR_REMOTE_DISCONNECT", f"{n.name}: {st} after {count} writes"
    slow = {k: round(v, 3) for k, v in delays.items() if v >= DETECT_S}
    assert not slow, f"remote_disconnect later than {DETECT_S} s after the kill: {slow}"
    each(live, lambda n: f"WAITMD {victim.name} absent 2000")  # dropped, not waiting for etcd
    for n in live:
        r = n.cmd(f"XFER WRITE {victim.name} {victim.addr} 4096 1")
        assert r.startswith("ERR") or "NIXL_ERR" in r, f"{n.name}: {r}"

    # one restarts under the same name: a new generation
    restarter.quit()  # its lease is revoked: the watches drop it
    each(keep, lambda n: f"WAITMD {restarter.name} absent 10000")
    again = start(RESTARTER)
    again.ok("ETCD_SEND")
    each(keep, lambda n: f"ETCD_FETCH {again.name}")
    each([again], lambda n: [f"ETCD_FETCH {p.name}" for p in keep])
    for n in keep:
        st = n.ok("POSTREQ old")[0]
        assert st == "NIXL_ERR_NOT_FOUND", f"{n.name}: old-generation request gave {st}"
        n.ok("RELREQ old")
    w2, r2 = mesh(keep + [again])  # new requests, both ways, with the new process
    t_end = time.monotonic()

    report = (f"8 hosts: up {t_up - t_start:.1f} s, 56 pairs {t_mesh - t_up:.1f} s "
              f"(slowest node: writes {w1:.2f} s, reads {r1:.2f} s); remote_disconnect after "
              f"{min(delays.values()):.3f}-{max(delays.values()):.3f} s; 30 pairs after the "
              f"restart: writes {w2:.2f} s, reads {r2:.2f} s; total {t_end - t_start:.1f} s")
    print(report)
