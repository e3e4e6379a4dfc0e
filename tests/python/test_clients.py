"""What NIXL's clients rely on (their own calls, one test each): return values of transfer and
check_xfer_state, None from get_*_descs on bad input, integer index arrays of any type, the
"cpu"/"cuda" aliases, truthy handles released by __del__, nixlXferTelemetry from _bindings,
exception types caught by name, and two threads on one agent in the default sync mode.
"""

import gc
import threading

import numpy as np
import pytest

from nixl import _bindings as nb
from nixl._api import nixl_agent, nixl_agent_config

from conftest import needs_ucx, wait_done


def _loopback(unique_name, base, n=4096, **cfg):
    a = nixl_agent(unique_name(base), nixl_agent_config(**cfg) if cfg else None)
    src = np.arange(n, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    reg = a.register_memory([(src.ctypes.data, n, 0, ""), (dst.ctypes.data, n, 0, "")], "DRAM")
    return a, src, dst, reg


@needs_ucx
def test_transfer_and_check_state_return_exact_strings(unique_name):
    a, src, dst, reg = _loopback(unique_name, "rv")
    local = a.get_xfer_descs([(src.ctypes.data, src.nbytes, 0)], "DRAM")
    remote = a.get_xfer_descs([(dst.ctypes.data, dst.nbytes, 0)], "DRAM")
    h = a.initialize_xfer("WRITE", local, remote, a.name)
    s = a.transfer(h)
    assert type(s) is str and s in ("DONE", "PROC")
    s = wait_done(a, h)
    assert s == "DONE"
    assert a.check_xfer_state(h) == "DONE"  # polled once more: DONE again
    assert a.check_xfer_state(h) == "DONE"
    assert np.array_equal(src, dst)
    h.release()
    a.deregister_memory(reg)


def test_get_descs_return_none_on_bad_input(unique_name):
    a = nixl_agent(unique_name("none"), nixl_agent_config(backends=[]))
    assert a.get_xfer_descs([(1, 2)], "DRAM") is None  # wrong arity
    assert a.get_reg_descs([(1, 2, 0)], "DRAM") is None  # 3-tuples for a registration
    assert a.get_xfer_descs([(1, 2, 0)]) is None  # no mem type
    assert a.get_xfer_descs(np.zeros((2, 2), dtype=np.int64), "DRAM") is None  # not N x 3
    assert a.get_reg_descs(object(), "DRAM") is None
    assert a.get_remote_descs([(1, 2, 0)], "DRAM") is None  # 3-tuples for remote descriptors
    with pytest.raises(KeyError):
        a.get_xfer_descs([(1, 2, 0)], "NOPE")


@needs_ucx
def test_index_arrays_of_any_integer_type(unique_name):
    a, src, dst, reg = _loopback(unique_name, "idx")
    k = 1024
    local = a.prep_xfer_dlist("", [(src.ctypes.data + i * k, k, 0) for i in range(4)], "DRAM")
    remote = a.prep_xfer_dlist(a.name, [(dst.ctypes.data + i * k, k, 0) for i in range(4)], "DRAM")
    for dt in (np.int64, np.uint64, np.int32, np.uint32, np.int16, np.uint8):
        dst[:] = 0
        li = np.arange(4, dtype=dt)
        ri = np.array([3, 2, 1, 0], dtype=dt)
        h = a.make_prepped_xfer("WRITE", local, li, remote, ri, notif_msg="str message")
        assert h
        a.transfer(h)
        assert wait_done(a, h) == "DONE"
        for i in range(4):
            assert np.array_equal(dst[(3 - i) * k:(4 - i) * k], src[i * k:(i + 1) * k]), dt
        h.release()
    # an N x 3 int64 array of descriptors
    arr = np.array([[src.ctypes.data, 16, 0], [src.ctypes.data + 16, 16, 0]], dtype=np.int64)
    assert a.get_xfer_descs(arr, "DRAM").descCount() == 2
    local.release()
    remote.release()
    a.deregister_memory(reg)


def test_cpu_and_cuda_aliases(unique_name):
    a = nixl_agent(unique_name("alias"), nixl_agent_config(backends=[]))
    assert a.get_xfer_descs([(1, 2, 0)], "cpu").getType() == nb.DRAM_SEG
    assert a.get_xfer_descs([(1, 2, 0)], "DRAM").getType() == nb.DRAM_SEG
    assert a.get_xfer_descs([(1, 2, 0)], "cuda").getType() == nb.VRAM_SEG
    assert a.get_reg_descs([(1, 2, 0, "")], "cuda").getType() == nb.VRAM_SEG
    assert a.nixl_mems["cpu"] == nb.DRAM_SEG and a.nixl_mems["cuda"] == nb.VRAM_SEG


@needs_ucx
def test_handles_are_truthy_and_released_by_del(unique_name):
    a, src, dst, reg = _loopback(unique_name, "del")
    released = []
    real = a.agent

    class spy:
        def __getattr__(self, n):
            return getattr(real, n)

        def releaseXferReq(self, h):
            released.append(h)
            return real.releaseXferReq(h)

        def releasedDlistH(self, h):
            released.append(h)
            return real.releasedDlistH(h)

    local = a.get_xfer_descs([(src.ctypes.data, 64, 0)], "DRAM")
    remote = a.get_xfer_descs([(dst.ctypes.data, 64, 0)], "DRAM")
    a.agent = spy()
    try:
        h = a.initialize_xfer("WRITE", local, remote, a.name)
        p = a.prep_xfer_dlist("", local)
        assert h and p and bool(h) is True and bool(p) is True
        a.transfer(h)
        assert wait_done(a, h) == "DONE"
        want = {int(h), int(p)}
        del h, p  # never released by the caller: __del__ does it
        gc.collect()
        assert want <= set(int(x) for x in released)
    finally:
        a.agent = real
    a.deregister_memory(reg)


def test_telemetry_class_and_exception_types_import():
    from nixl._bindings import nixlXferTelemetry  # vLLM turns NIXL off when this fails

    assert isinstance(nixlXferTelemetry, type)
    from nixl import (  # noqa: F401  (imported by type, as clients do)
        nixlBackendError,
        nixlCancelledError,
        nixlNotFoundError,
        nixlRemoteDisconnectError,
    )
    from nixl._api import nixlBind  # noqa: F401

    for e in (nixlBackendError, nixlCancelledError, nixlNotFoundError, nixlRemoteDisconnectError):
        assert issubclass(e, RuntimeError) and e is getattr(nb, e.__name__)
    with pytest.raises(nixlNotFoundError):
        nixl_agent("exc-types", nixl_agent_config(backends=[])).remove_remote_agent("nobody")


@needs_ucx
def test_exceptions_caught_by_type_on_the_data_path(unique_name):
    a, src, dst, reg = _loopback(unique_name, "exc")
    with pytest.raises(nb.nixlNotFoundError):
        a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, 8, 0)], "DRAM"),
                          a.get_xfer_descs([(dst.ctypes.data, 8, 0)], "DRAM"), "nobody")
    with pytest.raises(nb.nixlInvalidParamError):
        a.check_xfer_state(123456)  # not a handle of this agent
    a.deregister_memory(reg)


@needs_ucx
def test_two_threads_on_one_agent_in_the_default_sync_mode(unique_name):
    # A handshake thread loads peers and prepares lists while another makes, posts and polls
    # transfers; the default sync mode (no listener) is NONE, as in NIXL.
    a = nixl_agent(unique_name("thr"))
    assert nixl_agent_config().sync_mode is None
    peers = [nixl_agent(unique_name(f"thr-p{i}")) for i in range(4)]
    n = 1 << 14
    src = np.arange(n, dtype=np.uint8)
    sreg = a.register_memory([(src.ctypes.data, n, 0, "")], "DRAM")
    dsts = [np.zeros(n, dtype=np.uint8) for _ in peers]
    dregs = [p.register_memory([(d.ctypes.data, n, 0, "")], "DRAM") for p, d in zip(peers, dsts)]
    first = peers[0]
    a.add_remote_agent(first.get_agent_metadata())
    errors = []
    stop = threading.Event()

    def handshakes():
        try:
            for p, d in zip(peers[1:], dsts[1:]):
                a.add_remote_agent(p.get_agent_metadata())
                h = a.prep_xfer_dlist(p.name, [(d.ctypes.data, n, 0)], "DRAM")
                h.release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def transfers():
        try:
            while not stop.is_set():
                h = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, n, 0)], "DRAM"),
                                      a.get_xfer_descs([(dsts[0].ctypes.data, n, 0)], "DRAM"),
                                      first.name)
                a.transfer(h)
                assert wait_done(a, h) == "DONE"
                h.release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t1 = threading.Thread(target=handshakes)
    t2 = threading.Thread(target=transfers)
    t2.start()
    t1.start()
    t1.join(60)
    stop.set()
    t2.join(60)
    assert not t1.is_alive() and not t2.is_alive()
    assert errors == []
    assert np.array_equal(src, dsts[0])
    for p in peers:
        assert a.check_remote_metadata(p.name)
    a.deregister_memory(sreg)
    for p, r in zip(peers, dregs):
        p.deregister_memory(r)
