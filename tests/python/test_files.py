"""File transfers through the POSIX backend (DRAM <-> FILE, loopback), and query_memory."""

import os

import numpy as np
import pytest

import nixl
from nixl._api import nixl_agent, nixl_agent_config

from conftest import needs_posix, wait_done

N = 1 << 16


@pytest.fixture
def posix_agent(unique_name):
    return nixl_agent(unique_name("posix"), nixl_agent_config(backends=["POSIX"]))


@needs_posix
def test_write_file_then_read_back(posix_agent, tmp_path):
    a = posix_agent
    path = tmp_path / "data.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        src = (np.arange(N, dtype=np.uint32) * 2654435761).astype(np.uint8)
        back = np.zeros(N, dtype=np.uint8)
        dram = a.register_memory([(src.ctypes.data, N, 0, ""), (back.ctypes.data, N, 0, "")], "DRAM")
        files = a.register_memory([(0, 0, fd, str(path))], "FILE")  # unbounded file region
        file_descs = a.get_xfer_descs([(0, N // 2, fd), (N // 2, N // 2, fd)], "FILE")
        src_descs = a.get_xfer_descs([(src.ctypes.data, N // 2, 0),
                                      (src.ctypes.data + N // 2, N // 2, 0)], "DRAM")
        h = a.initialize_xfer("WRITE", src_descs, file_descs, a.name)
        assert a.transfer(h) in ("DONE", "PROC")
        assert wait_done(a, h) == "DONE"
        assert a.query_xfer_backend(h) == "POSIX"
        h.release()
        assert os.path.getsize(path) == N
        with open(path, "rb") as f:
            assert f.read() == src.tobytes()

        back_descs = a.get_xfer_descs([(back.ctypes.data, N, 0)], "DRAM")
        whole = a.get_xfer_descs([(0, N, fd)], "FILE")
        r = a.initialize_xfer("READ", back_descs, whole, a.name)
        a.transfer(r)
        assert wait_done(a, r) == "DONE"
        assert np.array_equal(back, src)
        r.release()

        # prepared lists against the agent itself (the file side is the "remote" side)
        local = a.prep_xfer_dlist("", back_descs)
        remote = a.prep_xfer_dlist(a.name, whole)
        back[:] = 0
        p = a.make_prepped_xfer("READ", local, [0], remote, [0])
        a.transfer(p)
        assert wait_done(a, p) == "DONE"
        assert np.array_equal(back, src)
        p.release()
        local.release()
        remote.release()

        # POSIX delivers no notifications
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


@needs_posix
def test_file_path_mode_and_query(posix_agent, tmp_path):
    a = posix_agent
    existing = tmp_path / "present.bin"
    existing.write_bytes(b"x" * 1000)
    missing = tmp_path / "absent.bin"
    resp = a.query_memory([(0, 0, 0, str(existing)), (0, 0, 0, str(missing))], "POSIX", "FILE")
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
    a.deregister_memory(files)
    a.deregister_memory(dram)


@needs_posix
def test_file_bad_input(posix_agent, tmp_path):
    a = posix_agent
    with pytest.raises(nixl.nixlInvalidParamError):
        a.register_memory([(0, 0, 987654, "")], "FILE")  # not an open descriptor
    with pytest.raises(ValueError, match="POSIX"):
        a.query_memory([(0, 0, 0, "x")], "UCX", "FILE")  # backend not created, as in NIXL
    with pytest.raises(nixl.nixlInvalidParamError):
        a.get_agent_metadata()  # POSIX alone cannot talk to peers
