"""Join and leave: four hosts exchange metadata all-pairs through their listeners (on host
addresses); one agent restarts under the same name; the others load the new generation; a
request made against the old generation is refused with a clear error, and a new one works."""

import pytest

MIB = 1 << 20
PORT = 7000


def start(sb, kind, h):
    return sb.node(h, kind, f"mh-{h}", size=4 * MIB, listen=True, port=PORT,
                   listen_address=sb.addr(h))


@pytest.mark.parametrize("leave", ["graceful", "crash"])
def test_restart_under_same_name(sandbox, kind, leave):
    sb = sandbox(4)
    nodes = [start(sb, kind, h) for h in range(4)]
    for x in nodes:
        for y in nodes:
            if x is not y:
                x.ok(f"FETCH {y.name} {sb.addr(y.host)} {PORT}")
    others, r = nodes[:3], nodes[3]
    # every pair moves data once
    seed = 0
    for x in nodes:
        for y in nodes:
            if x is not y:
                seed += 1
                y.ok(f"FILL {seed}")
                assert x.ok(f"XFER READ {y.name} {y.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
                x.ok(f"CHECK {seed} 0 {MIB}")
    for x in others:
        x.ok(f"MKREQ old WRITE {r.name} {r.addr} {MIB} 1")

    if leave == "graceful":
        for x in others:  # the leaving agent tells everybody
            r.ok(f"INVAL {sb.addr(x.host)} {PORT}")
        for x in others:
            x.ok(f"WAITMD {r.name} absent 10000")
        r.quit()
    else:
        r.kill()
        for x in others:  # the old request sees the death; the agent then drops the peer
            st = x.ok("POSTREQ old")[0]
            assert st in ("NIXL_ERR_REMOTE_DISCONNECT", "NIXL_ERR_NOT_FOUND"), st
            x.ok(f"WAITMD {r.name} absent 10000")

    r2 = start(sb, kind, 3)  # same host, name and port: the new generation
    r2.ok("FILL 99")
    for x in others:
        x.ok(f"FETCH {r2.name} {sb.addr(3)} {PORT}")
        r2.ok(f"FETCH {x.name} {sb.addr(x.host)} {PORT}")
    for x in others:
        st = x.ok("POSTREQ old")
        assert st[0] == "NIXL_ERR_NOT_FOUND", f"{x.name}: old-generation request gave {st}"
        x.ok("RELREQ old")
        assert x.ok(f"XFER READ {r2.name} {r2.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
        x.ok(f"CHECK 99 0 {MIB}")
    for x in others:
        x.ok(f"FILL {x.host + 50}")
        assert x.ok(f"XFER WRITE {r2.name} {r2.addr} {MIB} 1 hi{x.host}")[0] == "NIXL_SUCCESS"
        r2.ok(f"NOTIFCHECK {x.name} hi{x.host} {x.host + 50} 0 {MIB} 10000")
        # and the restarted agent reaches them
        assert r2.ok(f"XFER READ {x.name} {x.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
