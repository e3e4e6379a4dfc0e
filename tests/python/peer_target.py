"""Target side of test_processes.py, run as a separate process.

Prints "PORT <n>" and "DESCS <hex>" on stdout, waits for the initiator's notification, checks the
data, prints "DATA OK", then waits for the initiator to invalidate itself and prints "GONE".
"""

import sys
import time

import numpy as np

from nixl._api import nixl_agent, nixl_agent_config

N = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
name = sys.argv[1]
ini_name = sys.argv[3] if len(sys.argv) > 3 else "initiator"

agent = nixl_agent(name, nixl_agent_config(enable_listen_thread=True, listen_port=0))
buf = np.zeros(N, dtype=np.uint8)
reg = agent.register_memory([(buf.ctypes.data, N, 0, "")], "DRAM")
print("PORT", agent.listen_port, flush=True)
print("DESCS", agent.get_serialized_descs(reg.trim()).hex(), flush=True)


def wait(pred, what, timeout=20.0):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            print("TIMEOUT", what, flush=True)
            sys.exit(2)
        time.sleep(0.001)


wait(lambda: agent.check_remote_xfer_done(ini_name, b"written"), "notification")
expected = (np.arange(N, dtype=np.uint64) % 251).astype(np.uint8)
print("DATA OK" if np.array_equal(buf, expected) else "DATA BAD", flush=True)
wait(lambda: agent.check_remote_metadata(ini_name), "initiator metadata")
print("KNOWN", flush=True)
wait(lambda: not agent.check_remote_metadata(ini_name), "invalidation")
print("GONE", flush=True)
agent.deregister_memory(reg)
