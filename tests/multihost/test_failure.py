"""Failure across hosts: the target's agent process is SIGKILLed (or its whole host destroyed)
while two initiators on two other hosts are writing to it. Each initiator's request must end
with NIXL_ERR_REMOTE_DISCONNECT within 2 s, without hang or crash, and requests between the
live hosts must keep working. And the other way: a target waiting for a transfer of an initiator
learns that the initiator died, whether it loaded the initiator or not, and does not take an
initiator that unloaded it for gone."""

import pytest

from conftest import MIB, peer_dies_mid_transfer, target_keeps_initiator_that_forgot_it
from conftest import target_learns_initiator_died


@pytest.mark.parametrize("how", ["sigkill", "destroy-host"])
def test_peer_dies_mid_transfer(sandbox, kind, how):
    sb = sandbox(3)
    size = 16 * MIB
    nodes = [sb.node(h, kind, f"mh-{h}", size=size, listen=True, listen_address=sb.addr(h))
             for h in range(3)]
    peer_dies_mid_transfer(sb, nodes, how, size)


@pytest.mark.parametrize("target_loads", [True, False], ids=["loaded", "never-loaded"])
def test_a_waiting_target_learns_that_its_initiator_died(sandbox, kind, target_loads):
    # The decode side of a disaggregated server on its own host waits for the prefill's next
    # transfer; the prefill's process dies. The wait ends with ERR within 3 s instead of at its
    # deadline: the target watches an initiator whose metadata it loaded as a peer, and one it
    # never loaded by the beats the initiator's progress thread sends (docs/ucx.md).
    sb = sandbox(2)
    s = sb.node(0, kind, "mh-s", listen=True, listen_address=sb.addr(0))
    t = sb.node(1, kind, "mh-t", listen=True, listen_address=sb.addr(1))
    target_learns_initiator_died(sb, s, t, target_loads=target_loads)


def test_an_initiator_that_unloads_its_target_is_not_gone(sandbox, kind):
    # Dropping the target's metadata stops the beats with a bye: an invalidation is not an end.
    sb = sandbox(2)
    s = sb.node(0, kind, "mh-s", listen=True, listen_address=sb.addr(0))
    t = sb.node(1, kind, "mh-t", listen=True, listen_address=sb.addr(1))
    target_keeps_initiator_that_forgot_it(sb, s, t)
