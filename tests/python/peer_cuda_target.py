"""Target side of test_torch.py's two-process UCX test, run as a separate process.

Usage: peer_cuda_target.py <name> <bytes> <initiator name> <device>
Registers a torch CUDA tensor with backends=["UCX"], prints "PORT <n>" and "DESCS <hex>", waits
for the initiator's notification "written", checks the tensor (prints "DATA OK" or "DATA BAD"),
fills it with a second pattern and prints "FILLED", then waits for the initiator to invalidate
itself and prints "GONE".
"""

import sys

import torch

from nixl._api import nixl_agent, nixl_agent_config
from peer_util import announce, wait

name, n, ini_name, device = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

agent = nixl_agent(name, nixl_agent_config(backends=["UCX"], enable_listen_thread=True,
                                           listen_port=0))
buf = torch.zeros(n, dtype=torch.uint8, device=device)
reg = agent.register_memory(buf)
announce(agent, reg)


def pattern(mul):
    return ((torch.arange(n, dtype=torch.int64, device=device) * mul) % 251).to(torch.uint8)


wait(lambda: agent.check_remote_xfer_done(ini_name, b"written"), "notification")
# The notification comes after the data: no synchronisation with the initiator is needed.
print("DATA OK" if torch.equal(buf, pattern(1)) else "DATA BAD", flush=True)
buf.copy_(pattern(7))
torch.cuda.synchronize(device)
print("FILLED", flush=True)
wait(lambda: agent.check_remote_metadata(ini_name), "initiator metadata")
wait(lambda: not agent.check_remote_metadata(ini_name), "invalidation")
print("GONE", flush=True)
agent.deregister_memory(reg)
