"""Object stores through the OBJ backend against s3rver (started here on 127.0.0.1 with a temporary
folder), as NIXL's Python API has it: create_backend("OBJ", {...}), objects registered as
(0, length, devId, key), loopback prep_xfer_dlist(own_name, ...), and query_memory."""

import os
import subprocess

import numpy as np
import pytest

import nixl
from nixl._api import nixl_agent, nixl_agent_config

from conftest import BUILT, wait_done

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "obj-test-server.sh")

needs_obj = pytest.mark.skipif("OBJ" not in BUILT, reason="built without the OBJ backend")


@pytest.fixture
def s3rver(tmp_path):
    """The endpoint of an s3rver with bucket nixl-test, stopped at the end."""
    d = str(tmp_path / "s3")
    r = subprocess.run([SCRIPT, "start", "s3", d], capture_output=True, text=True, timeout=60)
    if r.returncode == 77:
        pytest.skip("s3rver not installed: " + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    yield r.stdout.strip()
    subprocess.run([SCRIPT, "stop", d], capture_output=True, timeout=60)


def obj_params(endpoint, **over):
    p = {"endpoint_override": endpoint, "scheme": "http", "bucket": "nixl-test",
         "access_key": "S3RVER", "secret_key": "S3RVER", "request_timeout_ms": "20000"}
    p.update(over)
    return p


@needs_obj
def test_obj_round_trip_loopback_and_query(unique_name, s3rver):
    a = nixl_agent(unique_name("obj"), nixl_agent_config(backends=[]))
    a.create_backend("OBJ", obj_params(s3rver))
    assert "OBJ" in a.get_plugin_list()
    assert set(a.get_plugin_mem_types("OBJ")) == {"DRAM_SEG", "OBJ_SEG"}
    n = 1 << 20
    src = (np.arange(n, dtype=np.uint32) * 2654435761).astype(np.uint8)
    back = np.zeros(n, dtype=np.uint8)
    dram = a.register_memory([(src.ctypes.data, n, 0, ""), (back.ctypes.data, n, 0, "")], "DRAM")
    objs = a.register_memory([(0, n, 7, "py/object-7"), (0, n, 8, "")], "OBJ")

    src_descs = a.get_xfer_descs([(src.ctypes.data, n, 0), (src.ctypes.data, 1000, 0)], "DRAM")
    obj_descs = a.get_xfer_descs([(0, n, 7), (0, 1000, 8)], "OBJ")
    h = a.initialize_xfer("WRITE", src_descs, obj_descs, a.name)
    assert a.transfer(h) in ("DONE", "PROC")
    assert wait_done(a, h, timeout=30) == "DONE"
    assert a.query_xfer_backend(h) == "OBJ"
    h.release()

    # Prepared lists against the agent itself: the objects are the "remote" side.
    local = a.prep_xfer_dlist("", [(back.ctypes.data, n // 2, 0), (back.ctypes.data + n // 2, n // 2, 0)], "DRAM")
    remote = a.prep_xfer_dlist(a.name, [(0, n // 2, 7), (n // 2, n // 2, 7)], "OBJ")
    p = a.make_prepped_xfer("READ", local, [0, 1], remote, [1, 0])  # halves swapped: ranged GETs
    a.transfer(p)
    assert wait_done(a, p, timeout=30) == "DONE"
    assert np.array_equal(back[: n // 2], src[n // 2:])
    assert np.array_equal(back[n // 2:], src[: n // 2])
    p.release()
    local.release()
    remote.release()

    info = a.query_memory([(0, n, 7, "py/object-7"), (0, 1000, 8, ""), (0, 0, 9, "missing")],
                          "OBJ", mem_type="OBJ")
    assert info[0] is not None and info[0]["size"] == str(n)
    assert info[1] is not None and info[1]["size"] == "1000"  # the key "8": its devId
    assert info[2] is None

    a.deregister_memory(objs)
    a.deregister_memory(dram)


@needs_obj
def test_obj_errors(unique_name, s3rver, monkeypatch):
    a = nixl_agent(unique_name("objerr"), nixl_agent_config(backends=[]))
    a.create_backend("OBJ", obj_params(s3rver))
    buf = np.zeros(4096, dtype=np.uint8)
    a.register_memory([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM")
    a.register_memory([(0, 0, 1, "never-written")], "OBJ")
    h = a.initialize_xfer("READ", a.get_xfer_descs([(buf.ctypes.data, 4096, 0)], "DRAM"),
                          a.get_xfer_descs([(0, 4096, 1)], "OBJ"), a.name)
    with pytest.raises(nixl.nixlNotFoundError):
        st = a.transfer(h)
        while st == "PROC":
            st = a.check_xfer_state(h)
    h.release()
    monkeypatch.delenv("AWS_DEFAULT_BUCKET", raising=False)
    no_bucket = {k: v for k, v in obj_params(s3rver).items() if k != "bucket"}
    b = nixl_agent(unique_name("objnob"), nixl_agent_config(backends=[]))
    with pytest.raises(nixl.nixlInvalidParamError, match="bucket"):
        b.create_backend("OBJ", no_bucket)
