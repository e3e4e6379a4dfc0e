"""Strided descriptors (NIXL 1.5): prep_xfer_dlist with an Nx5 numpy array (addr, len, dev,
stride, count) against the same blocks as tuples, byte for byte, over UCX between two agents;
flat indices across rows; the refusals (ValueError, NOT_FOUND, INVALID_PARAM)."""

import numpy as np
import pytest

import nixl
from nixl import _bindings as nb
from nixl._api import nixl_agent, nixl_agent_config

from conftest import wait_done

N = 1 << 18


@pytest.fixture
def two(unique_name):
    """Two UCX agents that know each other; the initiator's source and the target's buffers."""
    if "UCX" not in nb._BUILT_BACKENDS:
        pytest.skip("built without the UCX backend")
    cfg = nixl_agent_config()
    ini = nixl_agent(unique_name("sini"), cfg)
    tgt = nixl_agent(unique_name("stgt"), cfg)
    src = (np.arange(N, dtype=np.uint64) * 131 + 7).astype(np.uint8)
    dst1 = np.zeros(N, np.uint8)
    dst2 = np.zeros(N, np.uint8)
    regs = [ini.register_memory([(src.ctypes.data, N, 0, "")], "DRAM"),
            tgt.register_memory([(d.ctypes.data, N, 0, "") for d in (dst1, dst2)], "DRAM")]
    ini.add_remote_agent(tgt.get_agent_metadata())
    yield ini, tgt, src, dst1, dst2
    ini.deregister_memory(regs[0])
    tgt.deregister_memory(regs[1])


def rows(base, dtype=np.uint64):
    """Sparse 512-byte blocks at stride 2048 (32), then dense 256-byte ones (64): 96 blocks."""
    return np.array([[base, 512, 0, 2048, 32], [base + (1 << 17), 256, 0, 256, 64]], dtype=dtype)


def tuples(arr):
    return [(int(a) + k * int(s), int(ln), int(d)) for a, ln, d, s, c in arr for k in range(int(c))]


def write_all(ini, local, remote, n):
    h = ini.make_prepped_xfer("WRITE", local, list(range(n)), remote, list(range(n)))
    ini.transfer(h)
    assert wait_done(ini, h) == "DONE"
    ini.release_xfer_handle(h)


def test_strided_arrays_move_the_same_bytes_as_tuples(two):
    ini, tgt, src, dst1, dst2 = two
    ls = rows(src.ctypes.data)
    local = ini.prep_xfer_dlist("NIXL_INIT_AGENT", ls, "DRAM")
    remote = ini.prep_xfer_dlist(tgt.name, rows(dst1.ctypes.data, np.int64), "DRAM")
    write_all(ini, local, remote, 96)
    local_t = ini.prep_xfer_dlist("", tuples(ls), "DRAM")
    remote_t = ini.prep_xfer_dlist(tgt.name, tuples(rows(dst2.ctypes.data)), "DRAM")
    write_all(ini, local_t, remote_t, 96)
    assert np.array_equal(dst1, dst2)
    want = np.zeros(N, np.uint8)
    for a, ln, _ in tuples(rows(0)):
        want[a:a + ln] = src[a:a + ln]
    assert np.array_equal(dst1, want)
    # A strided handle pairs with a tuple one; "" is the local side too.
    dst1[:] = 0
    local2 = ini.prep_xfer_dlist("", ls, "DRAM")
    remote_t2 = ini.prep_xfer_dlist(tgt.name, tuples(rows(dst1.ctypes.data)), "DRAM")
    write_all(ini, local2, remote_t2, 96)
    assert np.array_equal(dst1, dst2)
    for h in (local, remote, local_t, remote_t, local2, remote_t2):
        ini.release_dlist_handle(h)


def test_flat_indices_cross_rows(two):
    ini, tgt, src, dst1, _ = two
    local = ini.prep_xfer_dlist("NIXL_INIT_AGENT", rows(src.ctypes.data), "DRAM")
    # 96 remote slots of 512 bytes, one descriptor each; block i's len bytes land in slot i.
    blocks = tuples(rows(0))
    remote = ini.prep_xfer_dlist(tgt.name, [(dst1.ctypes.data + i * 512, ln, 0)
                                            for i, (_, ln, _) in enumerate(blocks)], "DRAM")
    idx = [95, 40, 33, 32, 31, 0, 7]
    h = ini.make_prepped_xfer("WRITE", local, idx, remote, np.array(idx, np.int32))
    ini.transfer(h)
    assert wait_done(ini, h) == "DONE"
    for i in idx:
        a, ln, _ = blocks[i]
        assert np.array_equal(dst1[i * 512:i * 512 + ln], src[a:a + ln]), i
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.make_prepped_xfer("WRITE", local, [96], remote, [0])
    # 512 bytes locally (block 0) against a 256-byte remote slot: length mismatch
    short = ini.prep_xfer_dlist(tgt.name, [(dst1.ctypes.data, 256, 0)], "DRAM")
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.make_prepped_xfer("WRITE", local, [0], short, [0])
    ini.release_xfer_handle(h)
    for p in (local, remote, short):
        ini.release_dlist_handle(p)


def test_strided_refusals(two):
    ini, tgt, src, _, _ = two
    base = src.ctypes.data
    with pytest.raises(ValueError, match="Please specify a mem type for strided descriptors"):
        ini.prep_xfer_dlist("NIXL_INIT_AGENT", rows(base))
    with pytest.raises(ValueError, match="uint64 or int64"):
        ini.prep_xfer_dlist("NIXL_INIT_AGENT", rows(base).astype(np.float64), "DRAM")
    with pytest.raises(ValueError, match="C-contiguous"):
        ini.prep_xfer_dlist("NIXL_INIT_AGENT", np.asfortranarray(rows(base)), "DRAM")
    with pytest.raises(ValueError, match="Nx5"):
        ini.agent.prepXferDlist("", ini._mem("DRAM"), np.zeros((2, 4), np.uint64))
    # count 0, len 0, stride < len, a span past the region: NOT_FOUND
    for bad in ([base, 512, 0, 2048, 0], [base, 0, 0, 2048, 4], [base, 512, 0, 256, 4],
                [base, 512, 0, 2048, 200]):
        with pytest.raises(nixl.nixlNotFoundError):
            ini.prep_xfer_dlist("NIXL_INIT_AGENT", np.array([bad], np.uint64), "DRAM")
        with pytest.raises(nixl.nixlNotFoundError):
            ini.prep_xfer_dlist(tgt.name, np.array([bad], np.uint64), "DRAM")
    with pytest.raises(nixl.nixlNotFoundError):
        ini.prep_xfer_dlist("nobody", rows(base), "DRAM")
    with pytest.raises(nixl.nixlNotFoundError):
        ini.prep_xfer_dlist("NIXL_INIT_AGENT", np.zeros((0, 5), np.uint64), "DRAM")
    # An Nx3 array is still an expanded list.
    h = ini.prep_xfer_dlist("NIXL_INIT_AGENT", np.array([[base, 64, 0]], np.uint64), "DRAM")
    ini.release_dlist_handle(h)
