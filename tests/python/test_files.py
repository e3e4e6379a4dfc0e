"""The file backends through NIXL's Python API, DRAM <-> FILE with loopback to the agent itself:
POSIX, and GDS and GDS_MT against the project's fake libcufile. One body per behaviour over every
file backend: transfers and prepared lists against the agent's own name, FILE registered as NIXL
does (fd in dev) or in path mode, query_memory, notifications refused, bad input."""

import os
import pathlib

import numpy as np
import pytest

import nixl
from nixl._api import nixl_agent, nixl_agent_config

from conftest import BUILT, needs_posix, wait_done

N = 1 << 16


def fake_cufile():
    """The fake libcufile of this build ($NIXL_FAKE_CUFILE, else beside the module), or None."""
    env = os.environ.get("NIXL_FAKE_CUFILE")
    if env:
        return env
    # <build>/python/nixl/__init__.py -> <build>/tests/backends/gds/fake/libcufile.so.0
    build = pathlib.Path(nixl.__file__).resolve().parents[2]
    p = build / "tests" / "backends" / "gds" / "fake" / "libcufile.so.0"
    return str(p) if p.exists() else None


FAKE = fake_cufile()
needs_gds = [
    pytest.mark.skipif("GDS" not in BUILT, reason="built without the GDS backends"),
    pytest.mark.skipif(FAKE is None, reason="the fake libcufile was not built (NIXL_BUILD_TESTS)"),
]
FILE_BACKENDS = [
    pytest.param("POSIX", marks=needs_posix),
    pytest.param("GDS", marks=needs_gds),
    pytest.param("GDS_MT", marks=needs_gds),
]


@pytest.fixture(params=FILE_BACKENDS)
def file_agent(request, unique_name, monkeypatch):
    """An agent with one file backend (GDS and GDS_MT over the fake libcufile)."""
    if FAKE is not None:
        monkeypatch.setenv("NIXL_CUFILE_PATH", FAKE)
    backend = request.param
    return backend, nixl_agent(unique_name(backend.lower()), nixl_agent_config(backends=[backend]))


def test_write_file_then_read_back(file_agent, tmp_path):
    backend, a = file_agent
    path = tmp_path / "data.bin"
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
        assert os.path.getsize(path) == N
        data = path.read_bytes()
        assert data[:half] == src[half:].tobytes() and data[half:] == src[:half].tobytes()

        back_descs = a.get_xfer_descs([(back.ctypes.data, half, 0), (back.ctypes.data + half, half, 0)], "DRAM")
        r = a.initialize_xfer("READ", back_descs, file_descs, a.name)
        a.transfer(r)
        assert wait_done(a, r) == "DONE"
        assert np.array_equal(back, src)
        r.release()

        # prepared lists against the agent itself (the file side is the "remote" side)
        back[:] = 0
        local = a.prep_xfer_dlist("", back_descs)
        remote = a.prep_xfer_dlist(a.name, [(half, half, fd), (0, half, fd)], "FILE")
        p = a.make_prepped_xfer("READ", local, [0, 1], remote, [0, 1])
        a.transfer(p)
        assert wait_done(a, p) == "DONE"
        assert np.array_equal(back, src)
        p.release()
        local.release()
        remote.release()

        # file backends deliver no notifications
        with pytest.raises(nixl.nixlBackendError):
            a.get_new_notifs()
        n = a.initialize_xfer("WRITE", src_descs, file_descs, a.name, b"notif")
        with pytest.raises(nixl.nixlNotSupportedError):
            a.transfer(n)
        n.release()

        a.deregister_memory(files)
        a.deregister_memory(dram)
    finally:
        os.close(fd)


def test_file_path_mode_and_query(file_agent, tmp_path):
    backend, a = file_agent
    existing = tmp_path / "present.bin"
    existing.write_bytes(b"x" * 1000)
    missing = tmp_path / "absent.bin"
    resp = a.query_memory([(0, 0, 0, str(existing)), (0, 0, 0, str(missing))], backend, "FILE")
    assert len(resp) == 2
    assert resp[0] is not None and int(resp[0]["size"]) == 1000
    assert resp[1] is None
    # path mode: the backend opens the file; dev is only an identifier
    target = tmp_path / "created.bin"
    src = np.full(4096, 0x42, dtype=np.uint8)
    dram = a.register_memory([(src.ctypes.data, 4096, 0, "")], "DRAM")
    files = a.register_memory([(0, 0, 77, f"rw,create:{target}")], "FILE")
    h = a.initialize_xfer("WRITE", dram.trim(), a.get_xfer_descs([(0, 4096, 77)], "FILE"), a.name)
    a.transfer(h)
    assert wait_done(a, h) == "DONE"
    h.release()
    assert target.read_bytes() == src.tobytes()
    assert int(a.query_memory([(0, 0, 0, f"ro:{target}")], backend, "FILE")[0]["size"]) == 4096
    a.deregister_memory(files)
    a.deregister_memory(dram)


def test_file_bad_input(file_agent, tmp_path):
    backend, a = file_agent
    with pytest.raises(nixl.nixlInvalidParamError):
        a.register_memory([(0, 0, 987654, "")], "FILE")  # not an open descriptor
    with pytest.raises(nixl.nixlInvalidParamError):
        a.register_memory([(0, 0, 5, f"ro:{tmp_path / 'absent'}")], "FILE")  # path mode, no file
    with pytest.raises(ValueError, match=backend):
        a.query_memory([(0, 0, 0, "x")], "UCX", "FILE")  # backend not created, as in NIXL
    with pytest.raises(nixl.nixlInvalidParamError):
        a.get_agent_metadata()  # a file backend alone cannot talk to peers
