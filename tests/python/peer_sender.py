"""A peer that loads the target's metadata (hex, argv[3]), sends it one notification and waits
to be killed: argv[1] its name, argv[2] the target's."""

import sys
import time

from nixl._api import nixl_agent

agent = nixl_agent(sys.argv[1])
agent.add_remote_agent(bytes.fromhex(sys.argv[3]))
agent.send_notif(sys.argv[2], b"hello")
print("SENT", flush=True)
time.sleep(120)
