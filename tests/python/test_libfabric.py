"""The LIBFABRIC backend through NIXL's Python API: over tcp;ofi_rxm pinned to loopback."""

import os

import numpy as np
import pytest

from conftest import BUILT, wait_done, wait_for
from nixl._api import nixl_agent, nixl_agent_config

pytestmark = pytest.mark.skipif("LIBFABRIC" not in BUILT, reason="built without LIBFABRIC")

LO = {"provider": "tcp;ofi_rxm", "interfaces": "lo"}


def _pair(initiator_params, target_params):
    init = nixl_agent("lf-init", nixl_agent_config(backends=[]))
    tgt = nixl_agent("lf-tgt", nixl_agent_config(backends=[]))
    init.create_backend("LIBFABRIC", initiator_params)
    tgt.create_backend("LIBFABRIC", target_params)
    return init, tgt


def test_plugin_params_use_nixl_names():
    a = nixl_agent("lf-params", nixl_agent_config(backends=[]))
    assert "LIBFABRIC" in a.get_plugin_list()
    params = a.get_plugin_params("LIBFABRIC")
    for key in ("num_threads", "split_batch_size", "provider", "interfaces"):
        assert key in params
    assert a.get_plugin_mem_types("LIBFABRIC") == ["DRAM_SEG"]


def test_write_read_and_notification():
    init, tgt = _pair(dict(LO, num_threads="2"), LO)
    n = 1 << 20
    src = np.arange(n, dtype=np.uint8) * 7
    dst = np.zeros(n, dtype=np.uint8)
    src_reg = init.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    dst_reg = tgt.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    name = init.add_remote_agent(tgt.get_agent_metadata())
    assert name in ("lf-tgt", b"lf-tgt")
    h = init.initialize_xfer("WRITE", src_reg.trim(), dst_reg.trim(), name, b"lf-done")
    assert init.transfer(h) in ("PROC", "DONE")
    assert wait_done(init, h) == "DONE"
    wait_for(lambda: tgt.check_remote_xfer_done("lf-init", b"lf-done"), what="notification")
    assert np.array_equal(src, dst)
    init.release_xfer_handle(h)
    # READ back into a cleared source
    src[:] = 0
    h = init.initialize_xfer("READ", src_reg.trim(), dst_reg.trim(), name)
    init.transfer(h)
    assert wait_done(init, h) == "DONE"
    assert np.array_equal(src, dst)
    init.release_xfer_handle(h)


def test_backends_config_with_interface_from_environment():
    old = os.environ.get("FI_TCP_IFACE")
    os.environ["FI_TCP_IFACE"] = "lo"
    try:
        a = nixl_agent("lf-env", nixl_agent_config(backends=["LIBFABRIC"]))
        assert "LIBFABRIC" in a.backends
    finally:
        if old is None:
            del os.environ["FI_TCP_IFACE"]
        else:
            os.environ["FI_TCP_IFACE"] = old


def test_bad_parameter_is_refused():
    a = nixl_agent("lf-bad", nixl_agent_config(backends=[]))
    with pytest.raises(Exception):
        a.create_backend("LIBFABRIC", {"num_threads": "lots"})
