"""GDS and GDS_MT through NIXL's Python API, against the project's fake libcufile (DRAM <-> FILE,
loopback to the agent itself): create_backend with NIXL's parameters, nixl_agent_config's
num_threads, FILE registered as (0, length, fd, ""), transfers and prepared lists against the
agent's own name, query_memory, and the error without libcufile."""

import os
import pathlib

import numpy as np
import pytest

import nixl
from nixl._api import nixl_agent, nixl_agent_config

from conftest import BUILT, wait_done


def _fake_cufile():
    env = os.environ.get("NIXL_FAKE_CUFILE")
    if env:
        return env
    # <build>/python/nixl/__init__.py -> <build>/tests/backends/gds/fake/libcufile.so.0
    build = pathlib.Path(nixl.__file__).resolve().parents[2]
    p = build / "tests" / "backends" / "gds" / "fake" / "libcufile.so.0"
    return str(p) if p.exists() else None


FAKE = _fake_cufile()
pytestmark = [
    pytest.mark.skipif("GDS" not in BUILT, reason="built without the GDS backends"),
    pytest.mark.skipif(FAKE is None, reason="the fake libcufile was not built (NIXL_BUILD_TESTS)"),
]

N = 1 << 20


@pytest.fixture(autouse=True)
def fake_cufile(monkeypatch):
    monkeypatch.setenv("NIXL_CUFILE_PATH", FAKE)


def test_create_backends_with_nixl_parameters(unique_name):
    a = nixl_agent(unique_name("gds"), nixl_agent_config(backends=[]))
    a.create_backend("GDS")
    p = a.get_backend_params("GDS")
    assert (p["batch_pool_size"], p["batch_limit"], p["max_request_size"]) == ("16", "128", str(16 << 20))
    b = nixl_agent(unique_name("gdsmt"), nixl_agent_config(backends=[]))
    b.create_backend("GDS_MT", {"thread_count": "8"})
    assert b.get_backend_params("GDS_MT")["thread_count"] == "8"
    assert set(a.get_plugin_mem_types("GDS")) >= {"DRAM_SEG", "VRAM_SEG", "FILE_SEG"}


def test_num_threads_becomes_thread_count(unique_name):
    a = nixl_agent(unique_name("cfg"), nixl_agent_config(backends=["GDS_MT"], num_threads=3))
    assert "GDS_MT" in a.backends
    assert a.get_backend_params("GDS_MT")["thread_count"] == "3"


def test_without_libcufile_the_backend_does_not_start(unique_name, monkeypatch):
    monkeypatch.setenv("NIXL_CUFILE_PATH", "/nonexistent/libcufile.so.0")
    a = nixl_agent(unique_name("nolib"), nixl_agent_config(backends=[]))
    with pytest.raises(nixl.nixlBackendError, match="libcufile not found"):
        a.create_backend("GDS")
    with pytest.raises(nixl.nixlBackendError, match="libcufile not found"):
        a.create_backend("GDS_MT")


@pytest.mark.parametrize("backend", ["GDS", "GDS_MT"])
def test_dram_file_loopback(backend, unique_name, tmp_path):
    a = nixl_agent(unique_name(backend.lower()), nixl_agent_config(backends=[backend]))
    path = tmp_path / "kv.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        src = (np.arange(N, dtype=np.uint32) * 2654435761).astype(np.uint8)
        back = np.zeros(N, dtype=np.uint8)
        dram = a.register_memory([(src.ctypes.data, N, 0, ""), (back.ctypes.data, N, 0, "")], "DRAM")
        files = a.register_memory([(0, N, fd, "")], "FILE")  # NIXL's form: (offset, length, fd, "")
        half = N // 2
        src_descs = a.get_xfer_descs([(src.ctypes.data, half, 0), (src.ctypes.data + half, half, 0)], "DRAM")
        file_descs = a.get_xfer_descs([(half, half, fd), (0, half, fd)], "FILE")  # halves swapped
        h = a.initialize_xfer("WRITE", src_descs, file_descs, a.name)
        assert a.transfer(h) in ("DONE", "PROC")
        assert wait_done(a, h) == "DONE"
        assert a.query_xfer_backend(h) == backend
        h.release()
        with open(path, "rb") as f:
            data = f.read()
        assert data[:half] == src[half:].tobytes() and data[half:] == src[:half].tobytes()

        # prepared lists against the agent itself: the file list is the "remote" side
        local = a.prep_xfer_dlist("", [(back.ctypes.data, half, 0), (back.ctypes.data + half, half, 0)], "DRAM")
        remote = a.prep_xfer_dlist(a.name, [(half, half, fd), (0, half, fd)], "FILE")
        p = a.make_prepped_xfer("READ", local, [0, 1], remote, [0, 1])
        a.transfer(p)
        assert wait_done(a, p) == "DONE"
        assert np.array_equal(back, src)
        p.release()
        local.release()
        remote.release()

        info = a.query_memory([(0, 0, fd, str(path)), (0, 0, 0, str(tmp_path / "absent"))], backend, "FILE")
        assert info[0]["size"] == str(N)
        assert info[1] is None

        # notifications are not GDS's
        n = a.initialize_xfer("WRITE", src_descs, file_descs, a.name, b"notif")
        with pytest.raises(nixl.nixlNotSupportedError):
            a.transfer(n)
        n.release()
        a.deregister_memory(files)
        a.deregister_memory(dram)
    finally:
        os.close(fd)
