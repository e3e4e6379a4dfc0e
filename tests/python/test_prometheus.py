"""The Prometheus exporter (NIXL_TELEMETRY_EXPORTER=prometheus): NIXL's series on /metrics,
scraped with curl on 127.0.0.1 while a process moves data."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from nixl import _bindings as nb

pytestmark = [
    pytest.mark.skipif("prometheus" not in getattr(nb, "_BUILT_EXPORTERS", ()),
                       reason="built without the Prometheus exporter (libcpp-httplib-dev)"),
    pytest.mark.skipif("UCX" not in nb._BUILT_BACKENDS, reason="needs UCX"),
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]

# Runs transfers until told to stop (stdin closed); prints READY once the agents exist.
WORKER = r"""
import sys, numpy as np
from nixl._api import nixl_agent, nixl_agent_config
from nixl import _bindings as nb
a = nixl_agent("prom-a", nixl_agent_config(capture_telemetry=True))
b = nixl_agent("prom-b", nixl_agent_config(capture_telemetry=True))
n = 1 << 16
src = np.arange(n, dtype=np.uint8); dst = np.zeros(n, dtype=np.uint8)
ra = a.register_memory([(src.ctypes.data, n, 0, "")], "DRAM")
rb = b.register_memory([(dst.ctypes.data, n, 0, "")], "DRAM")
a.add_remote_agent(b.get_agent_metadata())
try:
    a.remove_remote_agent("nobody")
except nb.nixlNotFoundError:
    pass
print("READY", flush=True)
import select, time
end = time.monotonic() + 60
while time.monotonic() < end:
    if select.select([sys.stdin], [], [], 0)[0] and not sys.stdin.read(1):
        break
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, n, 0)], "DRAM"),
                          a.get_xfer_descs([(dst.ctypes.data, n, 0)], "DRAM"), "prom-b")
    s = a.transfer(h)
    done_by = time.monotonic() + 10  # a deadline in time, not a count of polls
    while s == "PROC" and time.monotonic() < done_by:
        s = a.check_xfer_state(h)
    if s == "PROC":
        sys.exit("transfer did not complete in 10 s")
    h.release()
    time.sleep(0.002)
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port):
    r = subprocess.run(["curl", "-sS", "--max-time", "5", f"http://127.0.0.1:{port}/metrics"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _stop(p):
    """Closes the worker's stdin (it leaves) and waits for it, 30 s at most, then kills it."""
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _agent_in_child(name, unset=(), **env_vars):
    """Makes agent `name` (no backends) in a child Python, with `env_vars` set and `unset` removed
    from its environment; the child prints "EXPORTING <whether it exports>"."""
    env = dict(os.environ, **env_vars)
    for k in unset:
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = ("from nixl._api import nixl_agent, nixl_agent_config\n"
            f"a = nixl_agent({name!r}, nixl_agent_config(backends=[]))\n"
            "print('EXPORTING', a._telemetry)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)


def _value(text, name, agent, extra=""):
    m = re.search(rf'^{name}\{{hostname="[^"]*",agent_name="{agent}"{extra}\}} (\d+)$', text, re.M)
    assert m, f"no {name} for {agent} in:\n{text[:3000]}"
    return int(m.group(1))


def test_metrics_scraped_during_transfers(unique_name):
    port = _free_port()
    env = dict(os.environ, NIXL_TELEMETRY_EXPORTER="prometheus",
               NIXL_TELEMETRY_PROMETHEUS_PORT=str(port), NIXL_TELEMETRY_ENABLE="y")
    env.pop("NIXL_TELEMETRY_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in p.stdout:  # nixl's INFO lines come first, on stdout, as in NIXL
            if line.strip() == "READY":
                break
        else:
            pytest.fail(f"worker never got ready: {p.stderr.read()[-2000:]}")
        first = _scrape(port)
        t0 = _value(first, "agent_tx_requests_num_total", "prom-a")
        time.sleep(0.5)
        second = _scrape(port)
        t1 = _value(second, "agent_tx_requests_num_total", "prom-a")
        assert t1 > t0  # counting while transfers run
        n = 1 << 16
        assert _value(second, "agent_tx_bytes_total", "prom-a") == n * t1
        assert _value(second, "agent_tx_last_bytes", "prom-a") == n
        assert _value(second, "agent_memory_registered_total", "prom-a") == n
        assert _value(second, "agent_memory_registered_total", "prom-b") == n
        assert _value(second, "agent_rx_bytes_total", "prom-b") == 0  # targets count nothing
        assert _value(second, "agent_errors_total", "prom-a",
                      ',status="NIXL_ERR_NOT_FOUND"') == 1
        count = _value(second, "agent_xfer_time_us_count", "prom-a")
        assert count >= t1 - 1  # completions seen between the two counters
        inf = _value(second, "agent_xfer_time_us_bucket", "prom-a", ',le="\\+Inf"')
        assert inf == count
        assert "# TYPE agent_xfer_post_time_us histogram" in second
        assert "# TYPE agent_xfer_time gauge" in second
    finally:
        _stop(p)


def test_port_in_use_runs_without_telemetry_export():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _agent_in_child("busy", NIXL_TELEMETRY_EXPORTER="prometheus",
                            NIXL_TELEMETRY_PROMETHEUS_PORT=str(port), NIXL_TELEMETRY_ENABLE="y")
        assert r.returncode == 0, r.stderr
        assert "EXPORTING False" in r.stdout
        assert "cannot bind" in r.stderr  # the C++ side's warning, on stderr as NIXL's


# prometheus_mp: Python agents in two processes, one endpoint; each process its own series.
MP_WORKER = r"""
import sys
from nixl._api import nixl_agent, nixl_agent_config
a = nixl_agent(sys.argv[1], nixl_agent_config(backends=[], capture_telemetry=True))
a.agent._telemetryEvent(0, 4096)  # agent_tx_bytes
print("READY", flush=True)
sys.stdin.read()
"""


def test_prometheus_mp_two_python_processes(tmp_path):
    port = _free_port()
    env = dict(os.environ, NIXL_TELEMETRY_EXPORTER="prometheus_mp", NIXL_TELEMETRY_ENABLE="y",
               NIXL_TELEMETRY_MULTIPROC_DIR=str(tmp_path / "mp"),
               NIXL_TELEMETRY_PROMETHEUS_PORT=str(port), LOCAL_RANK="3")
    env.pop("NIXL_TELEMETRY_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    procs = [subprocess.Popen([sys.executable, "-c", MP_WORKER, f"mp-py-{i}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    try:
        for p in procs:
            for line in p.stdout:
                if line.strip() == "READY":
                    break
            else:
                pytest.fail(f"worker never got ready: {p.stderr.read()[-2000:]}")
        text = ""
        deadline = time.monotonic() + 30  # a deadline in time
        while time.monotonic() < deadline:
            text = _scrape(port)
            if all(f'pid="{p.pid}"' in text for p in procs):
                break
            time.sleep(0.05)
        for i, p in enumerate(procs):
            assert re.search(rf'^agent_tx_bytes_total\{{hostname="[^"]*",agent_name="mp-py-{i}",'
                             rf'pid="{p.pid}",agent_instance="0",local_rank="3"\}} 4096$', text,
                             re.M), text[:3000]
        assert "# TYPE agent_xfer_time_us histogram" in text
        assert 'le="10000000"' in text and 'le="2500000"' not in text  # NIXL's defaults
    finally:
        for p in procs:
            _stop(p)


def test_prometheus_mp_needs_its_directory(tmp_path):
    r = _agent_in_child("mp-nodir", unset=("NIXL_TELEMETRY_MULTIPROC_DIR",),
                        NIXL_TELEMETRY_EXPORTER="prometheus_mp", NIXL_TELEMETRY_ENABLE="y")
    assert r.returncode != 0
    assert "NIXL_TELEMETRY_MULTIPROC_DIR" in r.stderr


def test_malformed_buckets_leave_the_agent_without_export():
    r = _agent_in_child("badbuckets", NIXL_TELEMETRY_EXPORTER="prometheus",
                        NIXL_TELEMETRY_ENABLE="y", NIXL_TELEMETRY_PROMETHEUS_PORT=str(_free_port()),
                        NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US="10, 5")
    assert r.returncode == 0, r.stderr
    assert "EXPORTING False" in r.stdout
    assert "NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US" in r.stderr
