"""Object stores through the OBJ backend against s3rver (started here on 127.0.0.1 with a temporary
folder), as NIXL's Python API has it: create_backend("OBJ", {...}), objects registered as
(0, length, devId, key), loopback prep_xfer_dlist(own_name, ...), and query_memory."""

import ctypes
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
    assert set(a.get_plugin_mem_types("OBJ")) == {"DRAM_SEG", "VRAM_SEG", "OBJ_SEG"}
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
        if a.transfer(h) == "PROC":
            wait_done(a, h)
    h.release()
    monkeypatch.delenv("AWS_DEFAULT_BUCKET", raising=False)
    no_bucket = {k: v for k, v in obj_params(s3rver).items() if k != "bucket"}
    b = nixl_agent(unique_name("objnob"), nixl_agent_config(backends=[]))
    with pytest.raises(nixl.nixlInvalidParamError, match="bucket"):
        b.create_backend("OBJ", no_bucket)


def _loads(name):
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


def _cudart():
    """The CUDA runtime through ctypes when a GPU is usable, else None."""
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            rt = ctypes.CDLL(name)
        except OSError:
            continue
        n = ctypes.c_int(0)
        if rt.cudaGetDeviceCount(ctypes.byref(n)) == 0 and n.value > 0:
            return rt
        return None
    return None


@needs_obj
def test_obj_vram_without_driver_is_refused(unique_name):
    if _loads("libcuda.so.1"):
        pytest.skip("libcuda.so.1 loads here: test_obj_vram_round_trip covers VRAM")
    a = nixl_agent(unique_name("objvram"), nixl_agent_config(backends=[]))
    a.create_backend("OBJ", obj_params("127.0.0.1:9"))
    fake = np.zeros(4096, dtype=np.uint8)  # host memory, never used as VRAM
    with pytest.raises(nixl.nixlNotSupportedError, match=r"VRAM needs the CUDA driver \(libcuda\.so\.1\)"):
        a.register_memory([(fake.ctypes.data, fake.nbytes, 0, "")], "VRAM", backends=["OBJ"])


@needs_obj
def test_obj_vram_round_trip(unique_name, s3rver):
    rt = _cudart()
    if rt is None:
        pytest.skip("no usable CUDA runtime and GPU")
    n = 3 << 20
    src = (np.arange(n, dtype=np.uint32) * 2654435761 >> 7).astype(np.uint8)
    back = np.zeros(n, dtype=np.uint8)
    ptrs = [ctypes.c_void_p(), ctypes.c_void_p()]
    for p in ptrs:
        assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
        assert rt.cudaMemset(p, 0, ctypes.c_size_t(n)) == 0
    try:
        assert rt.cudaMemcpy(ptrs[0], ctypes.c_void_p(src.ctypes.data), ctypes.c_size_t(n), 1) == 0
        assert rt.cudaDeviceSynchronize() == 0  # the pageable copy has ended
        a = nixl_agent(unique_name("objvram"), nixl_agent_config(backends=[]))
        a.create_backend("OBJ", obj_params(s3rver))
        vram = a.register_memory([(ptrs[0].value, n, 0, ""), (ptrs[1].value, n, 0, "")], "VRAM",
                                 backends=["OBJ"])
        objs = a.register_memory([(0, n, 11, "py/vram-object")], "OBJ")
        h = a.initialize_xfer("WRITE", a.get_xfer_descs([(ptrs[0].value, n, 0)], "VRAM"),
                              a.get_xfer_descs([(0, n, 11)], "OBJ"), a.name)
        a.transfer(h)
        assert wait_done(a, h, timeout=60) == "DONE"
        h.release()
        # Read back with the halves swapped: ranged GETs into VRAM sub-ranges.
        half = n // 2
        h = a.initialize_xfer("READ",
                              a.get_xfer_descs([(ptrs[1].value, half, 0),
                                                (ptrs[1].value + half, n - half, 0)], "VRAM"),
                              a.get_xfer_descs([(n - half, half, 11), (0, n - half, 11)], "OBJ"),
                              a.name)
        a.transfer(h)
        assert wait_done(a, h, timeout=60) == "DONE"
        h.release()
        assert rt.cudaMemcpy(ctypes.c_void_p(back.ctypes.data), ptrs[1], ctypes.c_size_t(n), 2) == 0
        assert np.array_equal(back[:half], src[n - half:])
        assert np.array_equal(back[half:], src[: n - half])
        a.deregister_memory(objs)
        a.deregister_memory(vram)
    finally:
        for p in ptrs:
            rt.cudaFree(p)
