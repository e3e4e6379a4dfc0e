"""nixl._api: the high-level agent, two agents in one process over UCX (and loopback)."""

import threading

import numpy as np
import pytest

import nixl
from nixl import _bindings as nb
from nixl import _utils
from nixl._api import (
    DEFAULT_COMM_PORT,
    nixl_agent,
    nixl_agent_config,
    nixl_prepped_dlist_handle,
    nixl_thread_sync_t,
    nixl_xfer_handle,
)

from conftest import needs_posix, needs_ucx, wait_done, wait_for

N = 1 << 16


def buf(fill=0, n=N):
    a = np.full(n, fill, dtype=np.uint8)
    return a, (a.ctypes.data, a.nbytes, 0)


def self_write(name):
    """An agent, one registered DRAM buffer and a WRITE of it onto the agent itself (not posted).
    Returns (agent, buffer, registration, handle); keep the buffer alive while the handle is."""
    a = nixl_agent(name)
    s, sd = buf(1)
    reg = a.register_memory([sd + ("",)], "DRAM")
    return a, s, reg, a.initialize_xfer("WRITE", reg.trim(), reg.trim(), a.name)


def test_import_surface():
    import nixl._api
    import nixl._bindings
    import nixl._utils
    import nixl.logging

    assert nixl.nixl_agent is nixl._api.nixl_agent
    assert DEFAULT_COMM_PORT == 8888
    assert [m.value for m in nixl_thread_sync_t] == [
        nb.NIXL_THREAD_SYNC_NONE, nb.NIXL_THREAD_SYNC_STRICT, nb.NIXL_THREAD_SYNC_RW]
    log = nixl.logging.get_logger("nixl.test")
    log.debug("logger works")
    assert "torch" not in nixl._api.__dict__


def test_config_defaults_and_types():
    c = nixl_agent_config()
    assert c.enable_pthread is True and c.enable_listen is False and c.port == 8888
    assert c.backends == ["UCX"] and c.num_threads == 0 and c.sync_mode is None
    with pytest.raises(TypeError):
        nixl_agent_config(sync_mode=1)
    nixl_agent_config(sync_mode=nixl_thread_sync_t.NIXL_THREAD_SYNC_RW)


def test_sync_mode_agent(monkeypatch, unique_name):
    seen = {}
    real = nb.nixlAgent

    def spy(name, cfg):
        seen["sync"] = cfg.syncMode
        seen["prog"] = cfg.useProgThread
        return real(name, cfg)

    monkeypatch.setattr(nb, "nixlAgent", spy)
    nixl_agent(unique_name("sync"), nixl_agent_config(backends=[]))
    assert seen == {"sync": nb.NIXL_THREAD_SYNC_NONE, "prog": True}
    nixl_agent(unique_name("sync"), nixl_agent_config(
        backends=[], sync_mode=nixl_thread_sync_t.NIXL_THREAD_SYNC_RW))
    assert seen["sync"] == nb.NIXL_THREAD_SYNC_RW


@needs_ucx
def test_plugins_and_backends(unique_name):
    a = nixl_agent(unique_name("plug"))
    assert "UCX" in a.get_plugin_list()
    assert "DRAM_SEG" in a.get_plugin_mem_types("UCX")
    assert "num_workers" in a.get_plugin_params("UCX")
    assert a.get_plugin_params("NOPE") == {} and a.get_plugin_mem_types("NOPE") == []
    assert list(a.backends) == ["UCX"] and isinstance(a.backends["UCX"], int)
    assert "DRAM_SEG" in a.get_backend_mem_types("UCX")
    assert a.get_backend_params("UCX")["num_workers"] == "1"
    assert a.get_backend_params("NOPE") == {} and a.get_backend_mem_types("NOPE") == []
    with pytest.raises(nixl.nixlInvalidParamError):
        a.create_backend("UCX")  # duplicate
    with pytest.raises(nixl.nixlNotFoundError):
        a.create_backend("NO_SUCH_BACKEND")
    with pytest.raises(TypeError):
        a.create_backend("POSIX", {"num_threads": 2})  # params are strings
    b = nixl_agent(unique_name("cfg"), nixl_agent_config(backends=["NO_SUCH_BACKEND"]))
    assert b.backends == {}
    with pytest.raises(ValueError):
        nixl_agent("")


@needs_ucx
@needs_posix
def test_instantiate_all_and_num_threads(unique_name):
    a = nixl_agent(unique_name("all"), instantiate_all=True)
    assert "UCX" in a.backends and "POSIX" in a.backends
    b = nixl_agent(unique_name("thr"), nixl_agent_config(num_threads=2, backends=["UCX", "POSIX"]))
    assert b.get_backend_params("UCX")["num_threads"] == "2"  # passed on as NIXL does
    assert "num_threads" not in b.get_backend_params("POSIX") or \
        b.get_backend_params("POSIX")["num_threads"] == b.get_plugin_params("POSIX")["num_threads"]


@needs_ucx
def test_register_deregister_and_descs(unique_name):
    a = nixl_agent(unique_name("reg"))
    arr, d = buf()
    reg = a.register_memory([d + ("",)], "DRAM")
    assert isinstance(reg, nb.nixlRegDList) and reg.descCount() == 1
    with pytest.raises(nixl.nixlInvalidParamError):
        a.register_memory(reg)  # already registered
    a.deregister_memory(reg)
    with pytest.raises(nixl.nixlNotFoundError):
        a.deregister_memory(reg)
    # numpy Nx3 input, explicit backend
    reg2 = a.register_memory(np.array([d], dtype=np.uint64), "DRAM", backends=["UCX"])
    assert reg2[0] == d + (b"",)
    a.deregister_memory(reg2, backends=["UCX"])
    # descriptor builders
    x = a.get_xfer_descs([d], "DRAM")
    assert isinstance(x, nb.nixlXferDList) and x[0] == d
    assert a.get_xfer_descs(x) is x
    assert a.get_xfer_descs(reg2) is None  # a registration list is refused, as in NIXL
    assert a.get_reg_descs(x) is None  # and a transfer list for registration
    assert a.get_xfer_descs(np.array([d, d], dtype=np.uint64), "DRAM").descCount() == 2
    assert a.get_xfer_descs([], "VRAM").getType() == nb.VRAM_SEG
    assert a.get_xfer_descs([d], "cpu").getType() == nb.DRAM_SEG
    assert a.get_reg_descs([d + ("meta",)], "DRAM")[0][3] == b"meta"
    r = a.get_remote_descs([d + ("peer",)], "DRAM")
    assert isinstance(r, nb.nixlRemoteDList) and r[0][3] == "peer"


@needs_ucx
def test_bad_descriptor_input(unique_name):
    a = nixl_agent(unique_name("bad"))
    arr, d = buf()
    assert a.get_xfer_descs([d]) is None  # no mem type
    assert a.get_xfer_descs([d + ("x",)], "DRAM") is None  # 4-tuples for transfers
    assert a.get_reg_descs([d], "DRAM") is None  # 3-tuples for registration
    assert a.get_xfer_descs(np.zeros((2, 2), dtype=np.uint64), "DRAM") is None
    assert a.get_xfer_descs(np.zeros((2, 3), dtype=np.uint64)) is None
    assert a.get_xfer_descs("nonsense", "DRAM") is None
    assert a.get_xfer_descs([1, 2, 3], "DRAM") is None
    with pytest.raises(KeyError):
        a.get_xfer_descs([d], "HBM")  # unknown memory type name
    with pytest.raises(ValueError):
        a.get_xfer_descs([d, (1, 2)], "DRAM")  # later tuple of the wrong size
    with pytest.raises(TypeError):
        a.register_memory([d], "DRAM")
    with pytest.raises(KeyError):
        a.register_memory([d + ("",)], "DRAM", backends=["NO_SUCH_BACKEND"])
    with pytest.raises(nixl.nixlNotFoundError):
        a.register_memory([(0, 100, 0, "key")], "OBJ")  # no backend takes object memory
    with pytest.raises(nixl.nixlInvalidParamError):
        a.register_memory([(arr.ctypes.data, 0, 0, "")], "DRAM")  # zero length
    with pytest.raises(nixl.nixlMismatchError):
        a.add_remote_agent(b"this is not metadata")
    with pytest.raises(nixl.nixlMismatchError):
        a.add_remote_agent(a.get_agent_metadata()[:-3])
    with pytest.raises(nixl.nixlInvalidParamError):
        a.add_remote_agent(a.get_agent_metadata())  # its own metadata
    with pytest.raises(nixl.nixlMismatchError):
        a.deserialize_descs(b"\x80\x04\x95pickle")
    with pytest.raises(TypeError):
        a.deserialize_descs("text")
    with pytest.raises(TypeError):
        a.get_serialized_descs([d])
    with pytest.raises(nixl.nixlNotFoundError):
        a.remove_remote_agent("never-loaded")
    with pytest.raises(nixl.nixlInvalidParamError):
        a.transfer(123456)
    with pytest.raises(KeyError):
        a.initialize_xfer("COPY", a.get_xfer_descs([d], "DRAM"), a.get_xfer_descs([d], "DRAM"), "x")


@pytest.fixture
def pair(unique_name):
    """Two UCX agents in this process, each knowing the other, with a registered buffer."""
    if "UCX" not in nb._BUILT_BACKENDS:
        pytest.skip("built without the UCX backend")
    cfg = nixl_agent_config(capture_telemetry=True)
    ini = nixl_agent(unique_name("ini"), cfg)
    tgt = nixl_agent(unique_name("tgt"), cfg)
    src, sd = buf(0x5A)
    dst, dd = buf(0)
    src[:] = np.arange(N, dtype=np.uint64).astype(np.uint8)
    ini_reg = ini.register_memory([sd + ("",)], "DRAM")
    tgt_reg = tgt.register_memory([dd + ("",)], "DRAM")
    assert ini.add_remote_agent(tgt.get_agent_metadata()) == tgt.name.encode()
    assert tgt.add_remote_agent(ini.get_agent_metadata()) == ini.name.encode()
    yield ini, tgt, src, dst, ini_reg, tgt_reg
    ini.deregister_memory(ini_reg)
    tgt.deregister_memory(tgt_reg)


def test_dram_write_with_notification(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    assert ini.check_remote_metadata(tgt.name)
    assert ini.check_remote_metadata(tgt.name, tgt_reg.trim())
    h = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name, b"UUID-1")
    assert isinstance(h, nixl_xfer_handle)
    with pytest.raises(nixl.nixlNotPostedError):
        ini.check_xfer_state(h)
    assert ini.transfer(h) in ("DONE", "PROC")
    assert wait_done(ini, h) == "DONE"
    wait_for(lambda: tgt.check_remote_xfer_done(ini.name, b"UUID"), what="notification")
    assert np.array_equal(src, dst)
    assert ini.query_xfer_backend(h) == "UCX"
    t = ini.get_xfer_telemetry(h)
    assert t.totalBytes == N and t.descCount == 1 and t.xferDuration >= t.postDuration >= 0
    dur, margin, method = ini.estimate_xfer_cost(h)
    assert dur >= 0 and margin >= 0 and method == "ANALYTICAL_BACKEND"
    ini.release_xfer_handle(h)
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.check_xfer_state(int(h))


def test_dram_read_and_repost(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    dst[:] = 7
    h = ini.initialize_xfer("READ", ini_reg.trim(), tgt_reg.trim(), tgt.name)
    ini.transfer(h)
    assert wait_done(ini, h) == "DONE"
    assert (src == 7).all()
    # repost with a new notification replaces the (absent) one from creation
    dst[:] = 9
    ini.transfer(h, b"second")
    assert wait_done(ini, h) == "DONE"
    assert (src == 9).all()
    wait_for(lambda: tgt.check_remote_xfer_done(ini.name, b"second"), what="notification")
    h.release()
    h.release()  # idempotent


def test_prepped_transfers(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    chunk = N // 4
    base_s, base_d = src.ctypes.data, dst.ctypes.data
    local = ini.prep_xfer_dlist("NIXL_INIT_AGENT", [(base_s + i * chunk, chunk, 0) for i in range(4)],
                                "DRAM")
    assert isinstance(local, nixl_prepped_dlist_handle)
    remote = ini.prep_xfer_dlist(tgt.name, [(base_d + i * chunk, chunk, 0) for i in range(4)], "DRAM")
    # reversed chunk order, indices as list and as numpy arrays
    h = ini.make_prepped_xfer("WRITE", local, [0, 1, 2, 3], remote, np.array([3, 2, 1, 0], np.int32),
                              b"prepped")
    ini.transfer(h)
    assert wait_done(ini, h) == "DONE"
    for i in range(4):
        assert np.array_equal(dst[(3 - i) * chunk:(4 - i) * chunk], src[i * chunk:(i + 1) * chunk])
    wait_for(lambda: tgt.check_remote_xfer_done(ini.name, b"prep"), what="notification")
    h2 = ini.make_prepped_xfer("WRITE", local, np.arange(4, dtype=np.uint32), remote, [0, 1, 2, 3],
                               skip_desc_merge=True)
    ini.transfer(h2)
    assert wait_done(ini, h2) == "DONE"
    assert np.array_equal(src, dst)
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.make_prepped_xfer("WRITE", local, [0, 1], remote, [0])
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.make_prepped_xfer("WRITE", local, [9], remote, [0])
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.make_prepped_xfer("WRITE", remote, [0], local, [0])  # sides swapped
    # index forms: a tuple, numpy integers inside a list; negative, huge and non-integer ones
    h3 = ini.make_prepped_xfer("WRITE", local, (0, 1), remote, [np.int64(2), np.uint8(3)])
    ini.release_xfer_handle(h3)
    for bad in ([-1], [2**40], np.array([-1])):
        with pytest.raises(nixl.nixlInvalidParamError, match="out of range"):
            ini.make_prepped_xfer("WRITE", local, [0], remote, bad)
    for bad in ([0.0], ["0"], [None], 7):
        with pytest.raises(TypeError, match="remote indices"):
            ini.make_prepped_xfer("WRITE", local, [0], remote, bad)
    ini.release_xfer_handle(h)
    ini.release_xfer_handle(h2)
    ini.release_dlist_handle(local)
    remote.release()
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.agent.releasedDlistH(int(local))


def test_notifications_api(pair):
    ini, tgt, *_ = pair
    ini.send_notif(tgt.name, b"hello")
    ini.send_notif(tgt.name, b"world", backend="UCX")
    got = {}
    wait_for(lambda: (got.update({k: got.get(k, []) + v for k, v in tgt.get_new_notifs().items()})
                      or sum(len(v) for v in got.values()) >= 2), what="two notifications")
    assert got[ini.name] == [b"hello", b"world"]
    # check_remote_xfer_done: substring match and removal of the first match only
    ini.send_notif(tgt.name, b"abc-1")
    ini.send_notif(tgt.name, b"abc-2")
    wait_for(lambda: len(tgt.update_notifs().get(ini.name, [])) >= 2, what="notifications")
    assert tgt.check_remote_xfer_done(ini.name, b"-2", tag_is_prefix=False)
    assert tgt.notifs[ini.name] == [b"abc-1"]
    assert tgt.check_remote_xfer_done(ini.name.encode(), "abc")
    assert not tgt.check_remote_xfer_done(ini.name, b"abc")
    with pytest.raises(nixl.nixlNotFoundError):
        ini.send_notif("unknown-agent", b"x")


def test_get_notifs_appends(pair):
    ini, tgt, *_ = pair
    ini.send_notif(tgt.name, b"n1")
    d = {ini.name: [b"old"]}
    wait_for(lambda: len(tgt.agent.getNotifs(d)[ini.name]) >= 2, what="notification")
    assert d[ini.name] == [b"old", b"n1"]


def test_partial_metadata_and_invalidate(pair, unique_name):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    third = nixl_agent(unique_name("third"))
    conn = tgt.get_partial_agent_metadata(None, inc_conn_info=True)
    assert third.add_remote_agent(conn) == tgt.name.encode()
    assert third.check_remote_metadata(tgt.name)
    assert not third.check_remote_metadata(tgt.name, tgt_reg.trim())
    part = tgt.get_partial_agent_metadata(tgt_reg, inc_conn_info=False, backends=["UCX"])
    third.add_remote_agent(part)
    assert third.check_remote_metadata(tgt.name, tgt_reg.trim())
    third.remove_remote_agent(tgt.name)
    assert not third.check_remote_metadata(tgt.name)
    with pytest.raises(nixl.nixlNotFoundError):
        third.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name)
    # requests built before an invalidation fail afterwards
    h = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name)
    ini.remove_remote_agent(tgt.name)
    with pytest.raises(nixl.nixlNotFoundError):
        ini.transfer(h)
    h.release()
    ini.add_remote_agent(tgt.get_agent_metadata())


def test_uncovered_descriptors(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    outside = ini.get_xfer_descs([(dst.ctypes.data + N, 16, 0)], "DRAM")
    inside = ini.get_xfer_descs([(src.ctypes.data, 16, 0)], "DRAM")
    with pytest.raises(nixl.nixlNotFoundError):
        ini.initialize_xfer("WRITE", inside, outside, tgt.name)
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.initialize_xfer("WRITE", inside, tgt_reg.trim(), tgt.name)  # length mismatch
    with pytest.raises(nixl.nixlNotFoundError):
        ini.prep_xfer_dlist(tgt.name, outside)


def test_threads_release_the_gil(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    errors = []

    def worker():
        try:
            for _ in range(50):
                h = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name)
                ini.transfer(h)
                if wait_done(ini, h) != "DONE":
                    errors.append("not done")
                h.release()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


@needs_ucx
def test_loopback_ucx(unique_name):
    a = nixl_agent(unique_name("loop"))
    s, sd = buf(3)
    d, dd = buf(0)
    reg = a.register_memory([sd + ("",), dd + ("",)], "DRAM")
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([sd], "DRAM"), a.get_xfer_descs([dd], "DRAM"),
                          a.name, b"self")
    a.transfer(h)
    assert wait_done(a, h) == "DONE"
    assert (d == 3).all()
    wait_for(lambda: a.check_remote_xfer_done(a.name, b"self"), what="self notification")
    h.release()
    a.deregister_memory(reg)


@needs_ucx
def test_utils_buffers(unique_name):
    a = nixl_agent(unique_name("utils"))
    p1 = _utils.malloc_passthru(4096)
    p2 = _utils.malloc_passthru(4096)
    assert p1 % 4096 == 0 and p2 % 4096 == 0
    _utils.ba_buf(p1, 4096)
    reg = a.register_memory([(p1, 4096, 0, ""), (p2, 4096, 0, "")], "DRAM")
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([(p1, 4096, 0)], "DRAM"),
                          a.get_xfer_descs([(p2, 4096, 0)], "DRAM"), a.name)
    a.transfer(h)
    assert wait_done(a, h) == "DONE"
    _utils.verify_transfer(p1, p2, 4096)
    h.release()
    a.deregister_memory(reg)
    _utils.free_passthru(p1)
    _utils.free_passthru(p2)


@needs_ucx
def test_telemetry_off_and_metadata_without_listener(unique_name):
    a, s, reg, h = self_write(unique_name("tel"))
    a.transfer(h)
    wait_done(a, h)
    import os
    if os.environ.get("NIXL_TELEMETRY_ENABLE") is None:
        with pytest.raises(nixl.nixlNoTelemetryError):
            a.get_xfer_telemetry(h)
    h.release()
    with pytest.raises(nixl.nixlInvalidParamError):
        a.send_local_metadata()  # no ip and no central store
    with pytest.raises(nixl.nixlInvalidParamError):
        a.fetch_remote_metadata("peer")
    with pytest.raises(nixl.nixlInvalidParamError):
        a.send_partial_agent_metadata(reg)  # central store needs a label
    assert a.listen_port == 0


@needs_ucx
def test_handles_release_on_drop(unique_name):
    a, s, reg, h = self_write(unique_name("drop"))
    raw = int(h)
    del h
    with pytest.raises(nixl.nixlInvalidParamError):
        a.agent.getXferStatus(raw)
    p = a.prep_xfer_dlist("", reg.trim())
    rawp = int(p)
    del p
    with pytest.raises(nixl.nixlInvalidParamError):
        a.agent.releasedDlistH(rawp)


def test_metadata_is_bytes_and_names(pair):
    ini, tgt, *_ = pair
    md = tgt.get_agent_metadata()
    assert isinstance(md, bytes) and md[:4] == b"NXMD"
    name = ini.add_remote_agent(md)  # identical metadata again is accepted
    assert isinstance(name, bytes) and name.decode() == tgt.name
    ini.make_connection(tgt.name)
    ini.make_connection(name)


@needs_ucx
def test_mem_view_errors(unique_name):
    a = nixl_agent(unique_name("mv"))
    with pytest.raises(nixl.nixlNotFoundError):  # agent "x" is not loaded
        a.prep_mem_view(a.get_remote_descs([(1, 2, 0, "x")], "VRAM"))
    with pytest.raises(nixl.nixlNotFoundError):  # placeholders only
        a.prep_mem_view(a.get_remote_descs([(0, 0, 0, "NULL_AGENT")], "VRAM"))
    with pytest.raises(nixl.nixlNotFoundError):  # unregistered VRAM
        a.prep_mem_view(a.get_xfer_descs([(4096, 64, 0)], "VRAM"))
    with pytest.raises(KeyError):
        a.prep_mem_view(a.get_xfer_descs([(4096, 64, 0)], "VRAM"), backends=["NOPE"])
    a.release_mem_view(1)  # an unknown handle: a warning only
