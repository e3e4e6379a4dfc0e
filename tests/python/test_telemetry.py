"""Agent telemetry events in the shared-memory ring under NIXL_TELEMETRY_DIR, and the reader."""

import os
import subprocess
import sys

import numpy as np
import pytest

from nixl import _bindings as nb
from nixl import telemetry
from nixl._api import nixl_agent, nixl_agent_config

from conftest import needs_ucx, wait_done


def test_ring_format_full_and_drops(tmp_path):
    path = str(tmp_path / "ring")
    w = telemetry.Writer(path, capacity=4)
    r = telemetry.Reader(path)
    assert r.capacity == 4 and r.pid == os.getpid() and r.read() == []
    for v in range(6):
        w.push(telemetry.EVENT_ID["agent_tx_bytes"], v)
    assert r.dropped == 2
    got = r.read()
    assert [(e, v) for _, e, v in got] == [("agent_tx_bytes", v) for v in range(4)]
    assert all(t > 1_600_000_000_000_000 for t, _, _ in got)  # µs since the epoch
    assert w.push(telemetry.EVENT_ID["agent_err_backend"], 1)  # room again after the read
    assert [(e, v) for _, e, v in r.read()] == [("agent_err_backend", 1)]
    with pytest.raises(ValueError):
        telemetry.Writer(str(tmp_path / "bad"), capacity=3)
    (tmp_path / "garbage").write_bytes(b"x" * 200)
    with pytest.raises(ValueError, match="magic"):
        telemetry.Reader(str(tmp_path / "garbage"))
    (tmp_path / "short").write_bytes(b"NXTELEM\0")
    with pytest.raises(ValueError, match="too small"):
        telemetry.Reader(str(tmp_path / "short"))
    w.close()
    r.close()


def test_metric_filter(tmp_path):
    w = telemetry.Writer(str(tmp_path / "f"), capacity=8, patterns=["agent_err_*"])
    assert not w.push(telemetry.EVENT_ID["agent_tx_bytes"], 5)
    assert w.push(telemetry.EVENT_ID["agent_err_not_found"], 1)
    assert [e for _, e, _ in telemetry.Reader(str(tmp_path / "f")).read()] == ["agent_err_not_found"]


def test_enabling_rule(monkeypatch, tmp_path):
    monkeypatch.delenv("NIXL_TELEMETRY_ENABLE", raising=False)
    monkeypatch.delenv("NIXL_TELEMETRY_DIR", raising=False)
    assert telemetry.writer_for("a", True) is None  # no directory: nothing written
    monkeypatch.setenv("NIXL_TELEMETRY_DIR", str(tmp_path))
    assert telemetry.writer_for("a", False) is None
    assert telemetry.writer_for("a/b", True).path == str(tmp_path / "a_b")
    monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", "no")
    assert telemetry.writer_for("a", True) is None  # the environment wins, as in NIXL
    monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", "yes")
    monkeypatch.setenv("NIXL_TELEMETRY_BUFFER_SIZE", "100")
    assert telemetry.writer_for("c", False).capacity == telemetry.DEFAULT_CAPACITY


@needs_ucx
def test_agent_writes_events_a_reader_process_sees(monkeypatch, tmp_path, unique_name):
    monkeypatch.delenv("NIXL_TELEMETRY_ENABLE", raising=False)
    monkeypatch.setenv("NIXL_TELEMETRY_DIR", str(tmp_path))
    a = nixl_agent(unique_name("tel"), nixl_agent_config(capture_telemetry=True))
    n = 1 << 14
    src = np.arange(n, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    reg = a.register_memory([(src.ctypes.data, n, 0, ""), (dst.ctypes.data, n, 0, "")], "DRAM")
    w = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, n, 0)], "DRAM"),
                          a.get_xfer_descs([(dst.ctypes.data, n, 0)], "DRAM"), a.name)
    a.transfer(w)
    assert wait_done(a, w) == "DONE"
    r = a.initialize_xfer("READ", a.get_xfer_descs([(dst.ctypes.data, n // 2, 0)], "DRAM"),
                          a.get_xfer_descs([(src.ctypes.data, n // 2, 0)], "DRAM"), a.name)
    a.transfer(r)
    assert wait_done(a, r) == "DONE"
    w.release()
    r.release()
    with pytest.raises(nb.nixlNotFoundError):
        a.remove_remote_agent("nobody")
    a.deregister_memory(reg)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-m", "nixl.telemetry", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    events = [line.split()[2:] for line in out.stdout.splitlines()]
    names = [e[0] for e in events]
    assert ["agent_memory_registered", str(2 * n)] in events
    assert ["agent_tx_bytes", str(n)] in events and ["agent_rx_bytes", str(n // 2)] in events
    assert names.count("agent_tx_requests_num") == 1 and names.count("agent_rx_requests_num") == 1
    assert names.count("agent_xfer_time") == 2 and names.count("agent_xfer_post_time") == 2
    assert ["agent_err_not_found", "1"] in events
    assert names[-1] == "agent_memory_deregistered"
    # consumed: a second read prints nothing new
    again = subprocess.run([sys.executable, "-m", "nixl.telemetry", str(tmp_path)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and again.stdout == ""


@needs_ucx
def test_agent_with_telemetry_dies_on_del(monkeypatch, tmp_path, unique_name):
    import weakref

    monkeypatch.setenv("NIXL_TELEMETRY_DIR", str(tmp_path))
    monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", "y")
    a = nixl_agent(unique_name("del"))
    assert a._telemetry is not None
    ref = weakref.ref(a)
    del a  # no reference cycle: gone without the garbage collector
    assert ref() is None
