"""Helpers of the target scripts that tests spawn (peer_target.py, peer_cuda_target.py)."""

import sys
import time


def announce(agent, reg):
    """Prints the listener port and the registered descriptors for the initiator to read."""
    print("PORT", agent.listen_port, flush=True)
    print("DESCS", agent.get_serialized_descs(reg.trim()).hex(), flush=True)


def wait(pred, what, timeout=30.0):
    """Polls `pred`; prints TIMEOUT and exits with 2 when it stays false."""
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            print("TIMEOUT", what, flush=True)
            sys.exit(2)
        time.sleep(0.001)
