"""Join and leave: four hosts exchange metadata all-pairs through their listeners (on host
addresses); one agent restarts under the same name; the others load the new generation; a
request made against the old generation is refused with a clear error, and a new one works."""

import pytest

from conftest import MIB, connect_all, restart_under_same_name

PORT = 7000


def start(sb, kind, h):
    return sb.node(h, kind, f"mh-{h}", size=4 * MIB, listen=True, port=PORT,
                   listen_address=sb.addr(h))


@pytest.mark.parametrize("leave", ["graceful", "crash"])
def test_restart_under_same_name(sandbox, kind, leave):
    sb = sandbox(4)
    nodes = [start(sb, kind, h) for h in range(4)]
    connect_all(nodes, nodes, sb)
    # every pair moves data once
    seed = 0
    for x in nodes:
        for y in nodes:
            if x is not y:
                seed += 1
                y.ok(f"FILL {seed}")
                assert x.ok(f"XFER READ {y.name} {y.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
                x.ok(f"CHECK {seed} 0 {MIB}")
    restart_under_same_name(sb, nodes[:3], nodes[3], leave, lambda: start(sb, kind, 3))
