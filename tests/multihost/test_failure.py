"""Failure across hosts: the target's agent process is SIGKILLed (or its whole host destroyed)
while two initiators on two other hosts are writing to it. Each initiator's request must end
with NIXL_ERR_REMOTE_DISCONNECT within 2 s, without hang or crash, and requests between the
live hosts must keep working."""

import pytest

from conftest import MIB, peer_dies_mid_transfer


@pytest.mark.parametrize("how", ["sigkill", "destroy-host"])
def test_peer_dies_mid_transfer(sandbox, kind, how):
    sb = sandbox(3)
    size = 16 * MIB
    nodes = [sb.node(h, kind, f"mh-{h}", size=size, listen=True, listen_address=sb.addr(h))
             for h in range(3)]
    peer_dies_mid_transfer(sb, nodes, how, size)
