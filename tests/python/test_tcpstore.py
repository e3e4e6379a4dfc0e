"""NIXL_TCPSTORE_ENDPOINT through nixl_agent, as NIXL selects it: metadata published to and
fetched from torch's own torch.distributed.TCPStore (tests/metadata/tcpstore_server.py)."""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from nixl._api import nixl_agent

from conftest import needs_ucx, wait_for, write_after_exchange

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(os.path.dirname(HERE), "metadata", "tcpstore_server.py")


@pytest.fixture
def tcpstore_endpoint():
    d = tempfile.mkdtemp(prefix="nixl-py-tcpstore-")
    port_file = os.path.join(d, "port")
    p = subprocess.Popen(["/usr/bin/python3", SERVER, port_file], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if p.poll() is not None:
                if p.returncode == 3:
                    pytest.skip("torch.distributed is not installed for /usr/bin/python3")
                pytest.fail(f"the TCPStore server exited with {p.returncode}")
            assert time.monotonic() < deadline, "the TCPStore server did not start in 30 s"
            time.sleep(0.02)
        with open(port_file) as f:
            yield f"127.0.0.1:{int(f.read())}"
    finally:
        p.terminate()
        p.wait(timeout=10)


@needs_ucx
def test_metadata_through_tcpstore(tcpstore_endpoint, monkeypatch, unique_name):
    monkeypatch.delenv("NIXL_ETCD_ENDPOINTS", raising=False)
    monkeypatch.setenv("NIXL_TCPSTORE_ENDPOINT", tcpstore_endpoint)
    monkeypatch.setenv("NIXL_TCPSTORE_TIMEOUT_MS", "10000")
    # --- a NIXL program: partial metadata by label, full metadata, a WRITE, invalidation ---
    owner = nixl_agent(unique_name("ts-owner"))
    user = nixl_agent(unique_name("ts-user"))
    dst = np.zeros(4096, dtype=np.uint8)
    data = np.full(4096, 0x5A, dtype=np.uint8)
    reg = owner.register_memory([(dst.ctypes.data, 4096, 0, "")], "DRAM")
    src = user.register_memory([(data.ctypes.data, 4096, 0, "")], "DRAM")

    owner.send_partial_agent_metadata(reg, inc_conn_info=True, label="part-1")
    user.fetch_remote_metadata(owner.name, label="part-1")
    wait_for(lambda: user.check_remote_metadata(owner.name, reg.trim()), what="partial metadata")

    write_after_exchange(user, owner, src, reg, b"via-tcpstore")
    assert np.array_equal(dst, data)

    # Peers are not told (no watch in a TCPStore): they drop the agent themselves.
    owner.invalidate_local_metadata()
    user.invalidate_local_metadata()
    user.deregister_memory(src)
    owner.deregister_memory(reg)


def test_etcd_and_tcpstore_are_exclusive(monkeypatch, unique_name):
    monkeypatch.setenv("NIXL_ETCD_ENDPOINTS", "127.0.0.1:1")
    monkeypatch.setenv("NIXL_TCPSTORE_ENDPOINT", "127.0.0.1:1")
    with pytest.raises(Exception, match="mutually exclusive"):
        nixl_agent(unique_name("ts-both"))
