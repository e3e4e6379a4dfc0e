"""GDS and GDS_MT through NIXL's Python API, against the project's fake libcufile: create_backend
with NIXL's parameters, nixl_agent_config's num_threads, the error without libcufile, and one of
GDS and GDS_MT per agent. Their transfers, path mode and queries are test_files.py's, over every
file backend."""

import pytest

import nixl
from nixl._api import nixl_agent, nixl_agent_config

from test_files import FAKE, needs_gds

pytestmark = needs_gds


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


def test_gds_and_gds_mt_not_in_one_agent(unique_name):
    """NIXL refuses the second of GDS and GDS_MT in one agent with NOT_ALLOWED; another agent may."""
    a = nixl_agent(unique_name("both"), nixl_agent_config(backends=["GDS"]))
    with pytest.raises(nixl.nixlNotAllowedError, match="only one of GDS and GDS_MT"):
        a.create_backend("GDS_MT")
    assert "GDS_MT" not in a.backends
    b = nixl_agent(unique_name("other"), nixl_agent_config(backends=["GDS_MT"]))
    assert "GDS_MT" in b.backends
