#!/usr/bin/python3
"""A torch.distributed.TCPStore server on 127.0.0.1 for the metadata tests.

Usage: tcpstore_server.py PORT_FILE [PORT]
PORT 0 (default) lets the system pick one. The bound port is written to PORT_FILE (atomically)
once the store serves; the server runs until stdin closes, SIGTERM, or 600 s pass.
Exit status 3: torch is missing (the test skips).
"""
import os
import signal
import sys
import threading
from datetime import timedelta

try:
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001
    print(f"torch.distributed unavailable: {e}", file=sys.stderr)
    sys.exit(3)


def main():
    port_file = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    store = dist.TCPStore("127.0.0.1", port, 1, True, timeout=timedelta(seconds=30))
    # A key set by torch itself, so tests see that both clients name keys alike.
    store.set("fromtorch", "hello from torch")
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(store.port))
    os.replace(tmp, port_file)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait(600)
    # Gone at once, like a killed store: the server's destructor would wait for its clients.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
