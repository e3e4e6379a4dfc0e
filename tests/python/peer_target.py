"""Target side of test_processes.py, run as a separate process.

Prints "PORT <n>" and "DESCS <hex>" on stdout, waits for the initiator's notification, checks the
data, prints "DATA OK", then waits for the initiator to invalidate itself and prints "GONE".
"""

import sys

import numpy as np

from nixl._api import nixl_agent, nixl_agent_config
from peer_util import announce, wait

N = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
name = sys.argv[1]
ini_name = sys.argv[3] if len(sys.argv) > 3 else "initiator"

agent = nixl_agent(name, nixl_agent_config(enable_listen_thread=True, listen_port=0))
buf = np.zeros(N, dtype=np.uint8)
reg = agent.register_memory([(buf.ctypes.data, N, 0, "")], "DRAM")
announce(agent, reg)
wait(lambda: agent.check_remote_xfer_done(ini_name, b"written"), "notification", timeout=20.0)
expected = (np.arange(N, dtype=np.uint64) % 251).astype(np.uint8)
print("DATA OK" if np.array_equal(buf, expected) else "DATA BAD", flush=True)
wait(lambda: agent.check_remote_metadata(ini_name), "initiator metadata", timeout=20.0)
print("KNOWN", flush=True)
wait(lambda: not agent.check_remote_metadata(ini_name), "invalidation", timeout=20.0)
print("GONE", flush=True)
agent.deregister_memory(reg)
