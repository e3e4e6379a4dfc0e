"""nixl._bindings: enums, exceptions, descriptor lists, the codec, the config class."""

import datetime
import pickle

import numpy as np
import pytest

from nixl import _bindings as nb


def test_module_constants_and_enums():
    assert nb.NIXL_INIT_AGENT == ""
    assert nb.DEFAULT_COMM_PORT == 8888
    assert isinstance(nb.HAVE_UCX_GPU_DEVICE_API, bool)  # True in builds with CUDA
    assert [int(x) for x in (nb.DRAM_SEG, nb.VRAM_SEG, nb.BLK_SEG, nb.OBJ_SEG, nb.FILE_SEG)] == [
        0, 1, 2, 3, 4]
    assert int(nb.nixl_mem_t.FILE_SEG) == 4
    assert (int(nb.NIXL_READ), int(nb.NIXL_WRITE)) == (0, 1)
    assert int(nb.NIXL_IN_PROG) == 1 and int(nb.NIXL_SUCCESS) == 0
    assert int(nb.NIXL_ERR_NOT_SUPPORTED) == -9 and int(nb.NIXL_ERR_NO_TELEMETRY) == -12
    assert int(nb.NIXL_ERR_XFER_STALLED) == -13
    assert int(nb.nixl_status_t.NIXL_ERR_XFER_STALLED) == -13
    assert int(nb.NIXL_THREAD_SYNC_STRICT) == 1 and int(nb.NIXL_THREAD_SYNC_RW) == 2
    assert nb.nixl_thread_sync_t.NIXL_THREAD_SYNC_DEFAULT == nb.NIXL_THREAD_SYNC_NONE
    assert int(nb.NIXL_COST_ANALYTICAL_BACKEND) == 0


@pytest.mark.parametrize(
    "name",
    ["nixlNotPostedError", "nixlInvalidParamError", "nixlBackendError", "nixlNotFoundError",
     "nixlMismatchError", "nixlNotAllowedError", "nixlRepostActiveError", "nixlUnknownError",
     "nixlNotSupportedError", "nixlRemoteDisconnectError", "nixlCancelledError",
     "nixlNoTelemetryError", "nixlXferStalledError"],
)
def test_exception_classes(name):
    cls = getattr(nb, name)
    assert issubclass(cls, RuntimeError)
    import nixl
    assert getattr(nixl, name) is cls


def test_xfer_dlist_forms():
    l0 = nb.nixlXferDList(nb.DRAM_SEG)
    assert l0.isEmpty() and l0.descCount() == 0 and l0.getType() == nb.DRAM_SEG
    l3 = nb.nixlXferDList(nb.DRAM_SEG, 3)
    assert l3.descCount() == 3 and l3[2] == (0, 0, 0)

    tl = nb.nixlXferDList(nb.VRAM_SEG, [(0x1000, 64, 1), (0x2000, 32, 1)])
    assert tl.getType() == nb.VRAM_SEG and tl.descCount() == 2
    assert tl[0] == (0x1000, 64, 1) and tl[-1] == (0x2000, 32, 1)
    tl[1] = (0x3000, 16, 2)
    assert tl[1] == (0x3000, 16, 2)
    tl.addDesc((0x4000, 8, 0))
    tl.append((0x5000, 8, 0))
    assert tl.descCount() == 4
    assert tl.index((0x4000, 8, 0)) == 2
    with pytest.raises(nb.nixlNotFoundError):
        tl.index((0x9999, 1, 0))
    tl.remDesc(0)
    assert tl[0] == (0x3000, 16, 2) and tl.descCount() == 3
    with pytest.raises(nb.nixlInvalidParamError):
        tl.remDesc(10)
    with pytest.raises(IndexError):
        tl[7]
    tl.clear()
    assert tl.isEmpty()

    arr = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.uint64)
    al = nb.nixlXferDList(nb.DRAM_SEG, arr)
    assert al.descCount() == 2 and al[1] == (4, 5, 6)
    assert nb.nixlXferDList(nb.DRAM_SEG, [tuple(arr[1])])[0] == (4, 5, 6)  # numpy integers
    al64 = nb.nixlXferDList(nb.DRAM_SEG, arr.astype(np.int64))
    assert al == al64
    assert al != nb.nixlXferDList(nb.DRAM_SEG, [(1, 2, 3)])
    assert al.trim() == al


def test_xfer_dlist_bad_input():
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG, [(1, 2)])
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG, [(1, 2, 3), (1, 2, 3, 4)])
    with pytest.raises(TypeError):
        nb.nixlXferDList(nb.DRAM_SEG, [[1, 2, 3]])
    with pytest.raises(TypeError):
        nb.nixlXferDList(nb.DRAM_SEG, [("a", 2, 3)])
    with pytest.raises(TypeError):
        nb.nixlXferDList(nb.DRAM_SEG, np.zeros((2, 3), dtype=np.float64))
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG, np.zeros((2, 4), dtype=np.uint64))
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG, np.zeros((3, 6), dtype=np.uint64)[:, ::2])
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG, [(-1, 2, 3)])
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG, [(1 << 64, 2, 3)])
    with pytest.raises(TypeError):
        nb.nixlXferDList(nb.DRAM_SEG, [(1.5, 2, 3)])
    with pytest.raises(TypeError):
        nb.nixlXferDList(7, [])  # memory type must be a nixl_mem_t
    with pytest.raises(TypeError):
        nb.nixlXferDList(nb.DRAM_SEG).addDesc([1, 2, 3])
    with pytest.raises(ValueError):
        nb.nixlXferDList(nb.DRAM_SEG).append((1, 2))


def test_reg_dlist_forms_and_trim():
    rl = nb.nixlRegDList(nb.FILE_SEG, [(0, 4096, 7, "/tmp/x"), (4096, 0, 8, b"rw:/tmp/y")])
    assert rl.getType() == nb.FILE_SEG and rl.descCount() == 2
    assert rl[0] == (0, 4096, 7, b"/tmp/x")
    assert rl[1][3] == b"rw:/tmp/y"
    t = rl.trim()
    assert isinstance(t, nb.nixlXferDList) and t.getType() == nb.FILE_SEG
    assert t[0] == (0, 4096, 7)
    arr = np.array([[10, 20, 0]], dtype=np.uint64)
    ra = nb.nixlRegDList(nb.DRAM_SEG, arr)
    assert ra[0] == (10, 20, 0, b"")
    with pytest.raises(ValueError):
        nb.nixlRegDList(nb.DRAM_SEG, [(1, 2, 3)])
    with pytest.raises(TypeError):
        nb.nixlRegDList(nb.DRAM_SEG, [(1, 2, 3, 4)])  # metaInfo must be str/bytes
    assert rl.index((0, 4096, 7, "/tmp/x")) == 0


def test_remote_dlist():
    r = nb.nixlRemoteDList(nb.DRAM_SEG, [(1, 2, 0, "peer")])
    assert r[0] == (1, 2, 0, "peer") and r.descCount() == 1
    r.append((3, 4, 0, b"other"))
    assert r[1][3] == "other"
    with pytest.raises(ValueError):
        nb.nixlRemoteDList(nb.DRAM_SEG, [(1, 2, 0)])


def test_codec_roundtrip_and_pickle():
    x = nb.nixlXferDList(nb.VRAM_SEG, [(1 << 40, 123, 3), (5, 6, 7)])
    r = nb.nixlRegDList(nb.FILE_SEG, [(0, 0, 9, b"\x00bin\xff")])
    for obj in (x, r):
        blob = nb._serialize_descs(obj)
        assert blob[:4] == b"NXMD"
        back = nb._deserialize_descs(blob)
        assert type(back) is type(obj) and back == obj
        p = pickle.loads(pickle.dumps(obj))
        assert type(p) is type(obj) and p == obj and p.getType() == obj.getType()
    assert nb._deserialize_descs(nb._serialize_descs(r))[0][3] == b"\x00bin\xff"


@pytest.mark.parametrize(
    "blob",
    [b"", b"garbage", b"NXMD", b"NXMD\x01\x00\x02\x00", b"NXMD\x01\x00\x09\x00\x00\x00\x00\x00\x00",
     b"NXMD\x63\x00\x02\x00\x00\x01\x00\x00\x00"],
)
def test_codec_rejects_garbage(blob):
    with pytest.raises(nb.nixlMismatchError):
        nb._deserialize_descs(blob)


def test_codec_rejects_truncated_and_padded():
    blob = nb._serialize_descs(nb.nixlXferDList(nb.DRAM_SEG, [(1, 2, 3)] * 4))
    for cut in range(len(blob) - 1):
        with pytest.raises(nb.nixlMismatchError):
            nb._deserialize_descs(blob[:cut])
    with pytest.raises(nb.nixlMismatchError):
        nb._deserialize_descs(blob + b"\x00")
    # a count far larger than the bytes present
    bad = bytearray(blob)
    bad[9:13] = (0x7FFFFFFF).to_bytes(4, "little")
    with pytest.raises(nb.nixlMismatchError):
        nb._deserialize_descs(bytes(bad))


def test_pickle_state_goes_through_codec():
    x = nb.nixlXferDList(nb.DRAM_SEG, [(1, 2, 3)])
    state = x.__getstate__()
    assert isinstance(state, tuple) and state[0][:4] == b"NXMD"
    y = nb.nixlXferDList.__new__(nb.nixlXferDList)
    with pytest.raises(nb.nixlMismatchError):
        y.__setstate__((b"not a list",))


def test_agent_config_class():
    c = nb.nixlAgentConfig()
    assert c.useProgThread is False and c.useListenThread is False
    assert c.listenPort == 8888 and c.lthrDelay == 100000 and c.pthrDelay == 0
    assert c.etcdWatchTimeout == 5000000 and c.captureTelemetry is False
    assert c.syncMode == nb.NIXL_THREAD_SYNC_NONE
    c2 = nb.nixlAgentConfig(True, True, 0, nb.NIXL_THREAD_SYNC_STRICT, 1, 5, 1000, True)
    assert c2.useProgThread and c2.useListenThread and c2.listenPort == 0
    assert c2.syncMode == nb.NIXL_THREAD_SYNC_STRICT and c2.pthrDelay == 5
    assert c2.lthrDelay == 1000 and c2.captureTelemetry
    c2.listenPort = 1234
    assert c2.listenPort == 1234


def test_agent_config_xfer_stall_timeout():
    # NIXL's xferStallTimeout: std::chrono::microseconds, a datetime.timedelta in Python; 0: off
    c = nb.nixlAgentConfig()
    assert c.xferStallTimeout == datetime.timedelta(0)
    c.xferStallTimeout = datetime.timedelta(seconds=1, microseconds=250)
    assert c.xferStallTimeout == datetime.timedelta(microseconds=1000250)
    c.xferStallTimeout = datetime.timedelta(milliseconds=-3)  # <= 0 is off, and kept as given
    assert c.xferStallTimeout == datetime.timedelta(milliseconds=-3)
    a = nb.nixlAgent("stall-config", c)
    del a
    import nixl
    conf = nixl.nixl_agent_config(backends=[], xfer_stall_timeout=datetime.timedelta(seconds=2))
    assert nixl._api._binding_config(conf).xferStallTimeout == datetime.timedelta(seconds=2)
    assert nixl._api._binding_config(nixl.nixl_agent_config(backends=[])).xferStallTimeout == (
        datetime.timedelta(0))


def test_raw_agent_errors():
    with pytest.raises(ValueError):
        nb.nixlAgent("", nb.nixlAgentConfig())
    a = nb.nixlAgent("raw-agent", nb.nixlAgentConfig())
    assert set(a.getAvailPlugins()) == set(nb._BUILT_BACKENDS)
    with pytest.raises(nb.nixlNotFoundError):
        a.createBackend("NO_SUCH_BACKEND", {})
    with pytest.raises(nb.nixlNotFoundError):
        a.getPluginParams("NO_SUCH_BACKEND")
    with pytest.raises(nb.nixlInvalidParamError):
        a.postXferReq(12345)
    with pytest.raises(nb.nixlInvalidParamError):
        a.getXferStatus(12345)
    with pytest.raises(nb.nixlInvalidParamError):
        a.releaseXferReq(12345)
    with pytest.raises(nb.nixlInvalidParamError):
        a.releasedDlistH(12345)
    with pytest.raises(nb.nixlInvalidParamError):
        a.getBackendParams(999)
    with pytest.raises(nb.nixlNotFoundError):  # no backend makes views of DRAM
        a.prepMemView(nb.nixlXferDList(nb.DRAM_SEG))
    with pytest.raises(nb.nixlMismatchError):
        a.loadRemoteMD(b"\x00" * 64)
