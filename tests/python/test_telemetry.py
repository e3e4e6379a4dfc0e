"""Agent telemetry events in NIXL's shared-memory ring (written by the library, for C++ and
Python agents alike) under NIXL_TELEMETRY_DIR, and the reader."""

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from nixl import _bindings as nb
from nixl import telemetry
from nixl._api import nixl_agent, nixl_agent_config

from conftest import needs_ucx, wait_done

ID = telemetry.EVENT_ID


@pytest.fixture
def ring_env(monkeypatch, tmp_path):
    for v in ("NIXL_TELEMETRY_ENABLE", "NIXL_TELEMETRY_EXPORTER", "NIXL_TELEMETRY_BUFFER_SIZE",
              "NIXL_TELEMETRY_ENABLED_METRICS"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("NIXL_TELEMETRY_DIR", str(tmp_path))
    return tmp_path


def _no_backend(name, telemetry_on=True):
    return nixl_agent(name, nixl_agent_config(backends=[], capture_telemetry=telemetry_on))


def _raw(path):
    """NIXL's layout, parsed by hand: header fields and the events in [read, write)."""
    data = open(path, "rb").read()
    write, read, version, expected, cap, mask = struct.unpack_from("=QQiiQQ", data, 0)
    events = []
    i = read
    while i != write:
        ev, pad, value = struct.unpack_from("=IIQ", data, 40 + 16 * i)
        events.append((ev, pad, value))
        i = (i + 1) & mask
    return dict(write=write, read=read, version=version, expected=expected, capacity=cap,
                mask=mask, size=len(data)), events


@needs_ucx
def test_ring_is_nixls_layout(ring_env, unique_name):
    a = nixl_agent(unique_name("lay"), nixl_agent_config(capture_telemetry=True))
    buf = np.zeros(1000, dtype=np.uint8)
    reg = a.register_memory([(buf.ctypes.data, 1000, 0, "")], "DRAM")
    path = ring_env / a.name  # $NIXL_TELEMETRY_DIR/<agent name>
    h, events = _raw(path)
    assert h["version"] == 4 and h["expected"] == 4
    assert h["capacity"] == 4096 and h["mask"] == 4095 and h["size"] == 40 + 16 * 4096
    assert events == [(ID["agent_memory_registered"], 0, 1000)]
    a.deregister_memory(reg)
    r = telemetry.Reader(str(path))
    assert r.read() == [("agent_memory_registered", 1000), ("agent_memory_deregistered", 1000)]
    assert r.read() == []
    assert _raw(path)[0]["read"] == 2  # the reader stored its position
    (ring_env / "foreign").write_bytes(struct.pack("=QQiiQQ", 0, 0, 4096, 4, 8, 7) + bytes(128))
    with pytest.raises(ValueError, match="Version mismatch: expected 4, got 4096"):
        telemetry.Reader(str(ring_env / "foreign"))


@needs_ucx
def test_full_ring_drops_and_reports_them(ring_env, monkeypatch, unique_name):
    monkeypatch.setenv("NIXL_TELEMETRY_BUFFER_SIZE", "4")
    a = nixl_agent(unique_name("full"), nixl_agent_config(capture_telemetry=True))
    bufs = [np.zeros(64 + i, dtype=np.uint8) for i in range(6)]
    regs = [a.register_memory([(b.ctypes.data, b.nbytes, 0, "")], "DRAM") for b in bufs]
    r = telemetry.Reader(str(ring_env / a.name))
    assert r.capacity == 4
    assert r.read() == [("agent_memory_registered", 64 + i) for i in range(3)]  # 3 lost
    a.deregister_memory(regs[0])
    assert r.read() == [("agent_telemetry_events_dropped", 3), ("agent_memory_deregistered", 64)]


@needs_ucx
def test_metric_filter_and_enabling_rule(ring_env, monkeypatch, unique_name):
    monkeypatch.setenv("NIXL_TELEMETRY_ENABLED_METRICS", "agent_err_*, agent_memory_de*")
    a = nixl_agent(unique_name("filt"), nixl_agent_config(capture_telemetry=True))
    buf = np.zeros(128, dtype=np.uint8)
    reg = a.register_memory([(buf.ctypes.data, 128, 0, "")], "DRAM")
    with pytest.raises(nb.nixlNotFoundError):
        a.remove_remote_agent("nobody")
    a.deregister_memory(reg)
    assert telemetry.Reader(str(ring_env / a.name)).read() == [
        ("agent_err_not_found", 1), ("agent_memory_deregistered", 128)]
    monkeypatch.delenv("NIXL_TELEMETRY_ENABLED_METRICS")
    _no_backend(unique_name("off"), telemetry_on=False)
    monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", "no")
    _no_backend(unique_name("envoff"), telemetry_on=True)  # the environment wins, as in NIXL
    monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", "y")
    on = _no_backend(unique_name("envon"), telemetry_on=False)
    assert sorted(os.listdir(ring_env)) == sorted([a.name, on.name])


@needs_ucx
def test_agent_writes_events_a_reader_process_sees(ring_env, unique_name):
    a = nixl_agent(unique_name("tel"), nixl_agent_config(capture_telemetry=True))
    n = 1 << 14
    src = np.arange(n, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    reg = a.register_memory([(src.ctypes.data, n, 0, ""), (dst.ctypes.data, n, 0, "")], "DRAM")
    w = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, n, 0)], "DRAM"),
                          a.get_xfer_descs([(dst.ctypes.data, n, 0)], "DRAM"), a.name)
    a.transfer(w)
    assert wait_done(a, w) == "DONE"
    assert a.check_xfer_state(w) == "DONE"  # polled again: no second completion
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
    out = subprocess.run([sys.executable, "-m", "nixl.telemetry", str(ring_env)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    events = [line.split()[1:] for line in out.stdout.splitlines()]
    names = [e[0] for e in events]
    assert events[0] == ["agent_memory_registered", str(2 * n)]
    assert ["agent_tx_bytes", str(n)] in events and ["agent_rx_bytes", str(n // 2)] in events
    assert names.count("agent_tx_requests_num") == 1 and names.count("agent_rx_requests_num") == 1
    assert names.count("agent_xfer_time") == 2 and names.count("agent_xfer_post_time") == 2
    assert ["agent_err_not_found", "1"] in events
    assert names[-1] == "agent_memory_deregistered"
    # consumed: a second read prints nothing new
    again = subprocess.run([sys.executable, "-m", "nixl.telemetry", str(ring_env)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and again.stdout == ""


def test_agent_with_telemetry_dies_on_del(ring_env, monkeypatch, unique_name):
    import weakref

    monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", "y")
    a = _no_backend(unique_name("del"))
    assert a._telemetry is True
    ref = weakref.ref(a)
    del a  # no reference cycle: gone without the garbage collector
    assert ref() is None
