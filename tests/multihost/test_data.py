"""Data between sandbox hosts over UCX: the listener brings the peers together (on a host
address), then WRITE and READ from 4 KiB to 64 MiB with 1 and 1000 descriptors, the
notification arriving after the data, every byte checked."""

from conftest import MIB, move_points


def test_data_across_hosts(sandbox, kind):
    sb = sandbox(2)
    size = 64 * MIB
    tgt = sb.node(1, kind, "mh-target", size=size, listen=True, port=7000,
                  listen_address=sb.addr(1))
    ini = sb.node(0, kind, "mh-initiator", size=size)
    ini.ok(f"FETCH mh-target {sb.addr(1)} {tgt.port}")
    ini.ok(f"SEND {sb.addr(1)} {tgt.port}")
    tgt.ok("WAITMD mh-initiator present 10000")
    move_points(ini, tgt)


def test_foreign_sysfs_is_explained(sandbox, kind):
    """Hosts whose /sys belongs to another network namespace (entered with `nsenter --net`, as
    some container set-ups do): UCX cannot see their interface, and the error says why and what
    to do instead of a bare "Destination is unreachable"."""
    sb = sandbox(2, env={"SANDBOX_STALE_SYS": "1", "SANDBOX_IFNAME": "mhveth0"})
    tgt = sb.node(1, kind, "mh-target", listen=True, listen_address=sb.addr(1))
    ini = sb.node(0, kind, "mh-initiator")
    r = ini.cmd(f"FETCH mh-target {sb.addr(1)} {tgt.port} 2000")
    assert r.startswith("ERR"), r
    # C++ sees the error in the future; Python's fetch is fire-and-forget, the log has it
    text = r + ini.stderr()
    assert "Destination is unreachable" in text, text
    assert "/sys/class/net" in text and "mhveth0" in text, text
    assert "/sys/class/net" in ini.stderr(), "no warning at agent creation"
