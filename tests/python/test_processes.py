"""Two processes exchange metadata through the listener and move data over UCX."""

import asyncio
import contextlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import nixl
from nixl import _bindings as nb
from nixl._api import nixl_agent, nixl_agent_config

from conftest import wait_done, wait_for

pytestmark = pytest.mark.skipif("UCX" not in nb._BUILT_BACKENDS, reason="needs UCX")

HERE = os.path.dirname(os.path.abspath(__file__))


def _read(proc, prefix, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line[len(prefix):].strip()
        if line.startswith("TIMEOUT"):
            pytest.fail(f"peer: {line.strip()}")
    err = proc.stderr.read() if proc.poll() is not None else ""
    pytest.fail(f"peer never printed {prefix!r}; stderr: {err[-2000:]}")


@contextlib.contextmanager
def spawned_peer(script, *args):
    """Runs the peer script `script` of this folder with `args`; kills it when the test leaves
    it running."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def leave_peer(ini, proc, port, timeout=20.0):
    """Invalidates `ini`'s metadata at the peer's listener; the peer prints GONE and exits 0."""
    ini.invalidate_local_metadata("127.0.0.1", port)
    assert _read(proc, "GONE", timeout=timeout) == ""
    assert proc.wait(timeout=timeout) == 0


def test_two_processes_through_listener(unique_name):
    n = 1 << 20
    tgt_name = unique_name("ptgt")
    ini_name = unique_name("pini")
    with spawned_peer("peer_target.py", tgt_name, n, ini_name) as proc:
        port = int(_read(proc, "PORT "))
        assert port > 0
        remote_descs = bytes.fromhex(_read(proc, "DESCS "))

        ini = nixl_agent(ini_name, nixl_agent_config(enable_listen_thread=True, listen_port=0))
        assert ini.listen_port > 0
        src = (np.arange(n, dtype=np.uint64) % 251).astype(np.uint8)
        reg = ini.register_memory([(src.ctypes.data, n, 0, "")], "DRAM")

        ini.fetch_remote_metadata(tgt_name, "127.0.0.1", port)
        wait_for(lambda: ini.check_remote_metadata(tgt_name), timeout=20, what="remote metadata")
        remote = ini.deserialize_descs(remote_descs)
        assert remote.descCount() == 1 and remote[0][1] == n
        assert ini.check_remote_metadata(tgt_name, remote)
        ini.send_local_metadata("127.0.0.1", port)

        h = ini.initialize_xfer("WRITE", reg.trim(), remote, tgt_name, b"written")
        ini.transfer(h)
        assert wait_done(ini, h, timeout=20) == "DONE"
        assert _read(proc, "DATA ") == "OK"
        assert _read(proc, "KNOWN") == ""
        h.release()

        leave_peer(ini, proc, port)
        ini.deregister_memory(reg)


def test_partial_metadata_through_listener_in_one_process(unique_name):
    cfg = nixl_agent_config(enable_listen_thread=True, listen_port=0)
    a = nixl_agent(unique_name("la"), cfg)
    b = nixl_agent(unique_name("lb"), cfg)
    assert a.listen_port > 0 and b.listen_port > 0 and a.listen_port != b.listen_port
    buf = np.zeros(4096, dtype=np.uint8)
    other = np.zeros(4096, dtype=np.uint8)
    reg = a.register_memory([(buf.ctypes.data, 4096, 0, "")], "DRAM")
    reg2 = a.register_memory([(other.ctypes.data, 4096, 0, "")], "DRAM")
    # connection info plus one of the two registrations
    a.send_partial_agent_metadata(reg, inc_conn_info=True, ip_addr="127.0.0.1", port=b.listen_port)
    wait_for(lambda: b.check_remote_metadata(a.name, reg.trim()), what="partial metadata")
    assert not b.check_remote_metadata(a.name, reg2.trim())
    # then the rest, incrementally
    a.send_partial_agent_metadata(reg2, ip_addr="127.0.0.1", port=b.listen_port, backends=["UCX"])
    wait_for(lambda: b.check_remote_metadata(a.name, reg2.trim()), what="second partial")
    # b pulls a's full metadata the other way round too
    a2 = nixl_agent(unique_name("lc"), cfg)
    a2.fetch_remote_metadata(a.name, "127.0.0.1", a.listen_port)
    wait_for(lambda: a2.check_remote_metadata(a.name, reg.trim()), what="fetched metadata")
    a.invalidate_local_metadata("127.0.0.1", b.listen_port)
    wait_for(lambda: not b.check_remote_metadata(a.name), what="invalidation")
    with pytest.raises(nixl.nixlInvalidParamError):
        a.fetch_remote_metadata(a.name, "127.0.0.1", b.listen_port)  # itself


def test_a_target_learns_that_a_sender_it_never_loaded_is_gone(unique_name):
    # The decode side of a disaggregated server: it never loads the prefill's metadata, and
    # waits for the prefill's transfer; the prefill dies. The wait ends with "ERR" at once.
    tgt = nixl_agent(unique_name("gtgt"))
    ini_name = unique_name("gini")
    md = tgt.get_agent_metadata().hex()
    with spawned_peer("peer_sender.py", ini_name, tgt.name, md) as proc:
        _read(proc, "SENT")
        assert tgt.wait_remote_xfer_blocking(ini_name, b"hello", timeout=20) == "DONE"
        assert tgt.get_gone_agents() == []
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        assert asyncio.run(tgt.wait_remote_xfer(ini_name, b"kv", timeout=20)) == "ERR"
        assert time.monotonic() - t0 < 5
        assert tgt.get_gone_agents() == [ini_name]
        assert tgt.wait_remote_xfer_blocking(ini_name, b"kv", timeout=20) == "ERR"
        assert tgt.wait_remote_xfer_blocking("someone-else", b"kv", timeout=0.2) == "PROC"

