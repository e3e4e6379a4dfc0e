"""Torch tensors as descriptors: CPU tensors over UCX, CUDA tensors over the CUDA backend."""

import sys

import pytest

from nixl import _bindings as nb
from nixl._api import nixl_agent, nixl_agent_config

from conftest import wait_done, wait_for

torch = pytest.importorskip("torch")


def test_nixl_does_not_import_torch():
    import subprocess

    code = "import sys, nixl, nixl._api; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif("UCX" not in nb._BUILT_BACKENDS, reason="built without the UCX backend")
def test_cpu_tensors(unique_name):
    ini = nixl_agent(unique_name("tini"))
    tgt = nixl_agent(unique_name("ttgt"))
    src = torch.arange(4096, dtype=torch.float32)
    parts = [torch.zeros(1024, dtype=torch.float32) for _ in range(4)]

    d = ini.get_xfer_descs(src)
    assert d.getType() == nb.DRAM_SEG and d[0] == (src.data_ptr(), src.numel() * 4, 0)
    assert ini.get_xfer_descs(src[::2]) is None  # not contiguous
    assert ini.get_xfer_descs([src, src[::2]]) is None

    ini_reg = ini.register_memory(src)
    tgt_reg = tgt.register_memory(parts)
    assert tgt_reg.descCount() == 4 and tgt_reg[0][3] == b""
    ini.add_remote_agent(tgt.get_agent_metadata())

    local = ini.get_xfer_descs([src[i * 1024:(i + 1) * 1024] for i in range(4)])
    remote = tgt.get_xfer_descs(parts)
    h = ini.initialize_xfer("WRITE", local, remote, tgt.name, b"tensors")
    ini.transfer(h)
    assert wait_done(ini, h) == "DONE"
    wait_for(lambda: tgt.check_remote_xfer_done(ini.name, b"tensors"), what="notification")
    assert torch.equal(torch.cat(parts), src)
    h.release()

    # round trip through the codec
    assert ini.deserialize_descs(ini.get_serialized_descs(remote)) == remote
    ini.deregister_memory(ini_reg)
    tgt.deregister_memory(tgt_reg)


def _cuda_ready():
    return "CUDA" in nb._BUILT_BACKENDS and torch.cuda.is_available()


@pytest.mark.skipif(not _cuda_ready(), reason="needs a GPU and the CUDA backend")
def test_cuda_tensors_through_cuda_backend(unique_name):
    a = nixl_agent(unique_name("gpu"), nixl_agent_config(backends=["CUDA"]))
    n = 1 << 20
    src = torch.arange(n, dtype=torch.int32, device="cuda:0")
    dst = torch.zeros(n, dtype=torch.int32, device="cuda:0")
    host = torch.zeros(n, dtype=torch.int32)

    d = a.get_xfer_descs(src)
    assert d.getType() == nb.VRAM_SEG and d[0][2] == 0

    reg_v = a.register_memory([src, dst])
    reg_h = a.register_memory(host)
    # VRAM -> VRAM, loopback, with a notification
    h = a.initialize_xfer("WRITE", a.get_xfer_descs(src), a.get_xfer_descs(dst), a.name, b"gpu")
    a.transfer(h)
    assert wait_done(a, h) == "DONE"
    assert a.query_xfer_backend(h) == "CUDA"
    torch.cuda.synchronize()
    assert torch.equal(src, dst)
    wait_for(lambda: a.check_remote_xfer_done(a.name, b"gpu"), what="notification")
    h.release()
    # VRAM -> DRAM (READ into host memory from the GPU side)
    r = a.initialize_xfer("READ", a.get_xfer_descs(host), a.get_xfer_descs(dst), a.name)
    a.transfer(r)
    assert wait_done(a, r) == "DONE"
    assert torch.equal(host, src.cpu())
    r.release()
    # many small descriptors through prepared lists
    k = 64
    chunk = n // k
    srcs = [src[i * chunk:(i + 1) * chunk] for i in range(k)]
    dsts = [dst[i * chunk:(i + 1) * chunk] for i in range(k)]
    dst.zero_()
    local = a.prep_xfer_dlist("", srcs)
    remote = a.prep_xfer_dlist(a.name, dsts)
    p = a.make_prepped_xfer("WRITE", local, list(range(k)), remote, list(reversed(range(k))),
                            skip_desc_merge=True)
    a.transfer(p)
    assert wait_done(a, p) == "DONE"
    torch.cuda.synchronize()
    for i in range(k):
        assert torch.equal(dsts[k - 1 - i], srcs[i])
    p.release()
    # as in NIXL, VRAM that prepared lists point into deregisters; the lists then fail their
    # next use (nixlNotFoundError) where NIXL would leave them dangling
    a.deregister_memory(reg_v)
    with pytest.raises(nb.nixlNotFoundError, match="deregistered"):
        a.make_prepped_xfer("WRITE", local, [0], remote, [0])
    a.release_dlist_handle(local)
    a.release_dlist_handle(remote)
    a.deregister_memory(reg_h)


def _ucx_vram_skip_reason(unique_name):
    """Why CUDA tensors cannot move through UCX here, or None."""
    if "UCX" not in nb._BUILT_BACKENDS:
        return "built without the UCX backend"
    if not torch.cuda.is_available():
        return "needs a GPU"
    probe = nixl_agent(unique_name("uprobe"), nixl_agent_config(backends=["UCX"]))
    t = torch.zeros(16, dtype=torch.uint8, device="cuda:0")
    try:
        reg = probe.register_memory(t)
    except Exception as e:  # a UCX without CUDA support refuses VRAM
        return f"UCX cannot register CUDA memory here: {e}"
    probe.deregister_memory(reg)
    return None


def test_cuda_tensors_two_processes_through_ucx(unique_name):
    """The vLLM path: torch CUDA tensors registered with backends=["UCX"], two processes."""
    from test_processes import _read, leave_peer, spawned_peer

    reason = _ucx_vram_skip_reason(unique_name)
    if reason:
        pytest.skip(reason)
    n = 16 << 20
    device = "cuda:1" if torch.cuda.device_count() > 1 else "cuda:0"
    tgt_name, ini_name = unique_name("utgt"), unique_name("uini")
    with spawned_peer("peer_cuda_target.py", tgt_name, n, ini_name, device) as proc:
        port = int(_read(proc, "PORT ", timeout=60))
        remote_descs = bytes.fromhex(_read(proc, "DESCS "))
        ini = nixl_agent(ini_name, nixl_agent_config(backends=["UCX"], enable_listen_thread=True,
                                                     listen_port=0))
        ar = torch.arange(n, dtype=torch.int64, device="cuda:0")
        src = (ar % 251).to(torch.uint8)
        dst = torch.zeros(n, dtype=torch.uint8, device="cuda:0")
        torch.cuda.synchronize()
        reg = ini.register_memory([src, dst])
        ini.fetch_remote_metadata(tgt_name, "127.0.0.1", port)
        wait_for(lambda: ini.check_remote_metadata(tgt_name), timeout=20, what="remote metadata")
        remote = ini.deserialize_descs(remote_descs)
        assert remote.getType() == nb.VRAM_SEG and remote[0][1] == n
        ini.send_local_metadata("127.0.0.1", port)

        h = ini.initialize_xfer("WRITE", ini.get_xfer_descs(src), remote, tgt_name, b"written")
        ini.transfer(h)
        assert wait_done(ini, h, timeout=30) == "DONE"
        assert ini.query_xfer_backend(h) == "UCX"
        assert _read(proc, "DATA ") == "OK"
        h.release()

        _read(proc, "FILLED")
        r = ini.initialize_xfer("READ", ini.get_xfer_descs(dst), remote, tgt_name)
        ini.transfer(r)
        assert wait_done(ini, r, timeout=30) == "DONE"
        torch.cuda.synchronize()
        assert torch.equal(dst, ((ar * 7) % 251).to(torch.uint8))
        r.release()

        leave_peer(ini, proc, port, timeout=30)
        ini.deregister_memory(reg)
